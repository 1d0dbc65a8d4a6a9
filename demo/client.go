package demo

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// Client is the API as an operator's program calls it: Connect with the
// root token.
type Client struct {
	Sites      bettercomputev1connect.SitesServiceClient
	SiteTokens bettercomputev1connect.SiteTokensServiceClient
	Pools      bettercomputev1connect.PoolsServiceClient
	Images     bettercomputev1connect.ImagesServiceClient
	Profiles   bettercomputev1connect.ProfilesServiceClient
	Metal      bettercomputev1connect.MetalServiceClient
	Commands   bettercomputev1connect.CommandsServiceClient
	Workflows  bettercomputev1connect.WorkflowsServiceClient
}

// NewClient returns a client of the API at url with the token in tokenFile;
// opts come after the client's own (an interceptor of theirs sees the answers).
func NewClient(url, tokenFile string, more ...connect.ClientOption) (*Client, error) {
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, err
	}
	token := strings.TrimSpace(string(b))
	auth := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	})
	hc := http.DefaultClient
	opts := append([]connect.ClientOption{connect.WithProtoJSON(), connect.WithInterceptors(auth)}, more...)
	return &Client{
		Sites:      bettercomputev1connect.NewSitesServiceClient(hc, url, opts...),
		SiteTokens: bettercomputev1connect.NewSiteTokensServiceClient(hc, url, opts...),
		Pools:      bettercomputev1connect.NewPoolsServiceClient(hc, url, opts...),
		Images:     bettercomputev1connect.NewImagesServiceClient(hc, url, opts...),
		Profiles:   bettercomputev1connect.NewProfilesServiceClient(hc, url, opts...),
		Metal:      bettercomputev1connect.NewMetalServiceClient(hc, url, opts...),
		Commands:   bettercomputev1connect.NewCommandsServiceClient(hc, url, opts...),
		Workflows:  bettercomputev1connect.NewWorkflowsServiceClient(hc, url, opts...),
	}, nil
}

// ImageProfile registers img in the catalog and creates profile id,
// version 1, that deploys it: deploy.image with the image and with's
// inputs, then boot.kexec. It returns the image's id.
func (c *Client) ImageProfile(ctx context.Context, id string, img *v1.RegisterImageRequest, with map[string]any) (string, error) {
	im, err := c.Images.Register(ctx, connect.NewRequest(img))
	if err != nil {
		return "", fmt.Errorf("images.register %s: %w", img.Name, err)
	}
	in := map[string]any{"image": im.Msg.Image.Id}
	maps.Copy(in, with)
	w, err := structpb.NewStruct(in)
	if err != nil {
		return "", err
	}
	if _, err := c.Profiles.Create(ctx, connect.NewRequest(&v1.CreateProfileRequest{Profile: &v1.Profile{
		Id: id, Version: 1, Target: "metal", Role: "host",
		Steps: []*v1.ProfileStep{{Use: "deploy.image", With: w}, {Use: "boot.kexec"}}}})); err != nil {
		return "", fmt.Errorf("profiles.create %s: %w", id, err)
	}
	return im.Msg.Image.Id, nil
}
