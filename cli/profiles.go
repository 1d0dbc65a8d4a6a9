package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
)

// profilesManageCommands are profiles render, update and delete.
func profilesManageCommands() []*cli.Command {
	version := func(usage string) cli.Flag { return &cli.IntFlag{Name: "profile-version", Usage: usage} }
	return []*cli.Command{
		{Name: "render", Usage: "show the plan a profile version resolves to: each step, where it runs, its inputs after defaults",
			ArgsUsage: "ID", Flags: []cli.Flag{version("version to render")}, Action: profilesRender},
		{Name: "update", Usage: "make a profile private or public (public: every tenant may read and deploy it); steps never change",
			ArgsUsage: "ID", Flags: []cli.Flag{version("only this version (default: every version)"),
				&cli.StringFlag{Name: "visibility", Usage: "private or public"}},
			Action: func(c *cli.Context) error {
				return simple(c, []string{"ID"}, []string{"visibility"}, bettercomputev1connect.ProfilesServiceUpdateProcedure,
					func(s *session) *v1.UpdateProfileRequest {
						return &v1.UpdateProfileRequest{Id: s.args[0], ProfileVersion: int32(c.Int("profile-version")), Visibility: c.String("visibility")}
					})
			}},
		{Name: "delete", Usage: "delete a profile no workflow or deployed node uses",
			ArgsUsage: "ID", Flags: []cli.Flag{version("only this version (default: every version)")},
			Action: func(c *cli.Context) error {
				return simple(c, []string{"ID"}, nil, bettercomputev1connect.ProfilesServiceDeleteProcedure,
					func(s *session) *v1.DeleteProfileRequest {
						return &v1.DeleteProfileRequest{Id: s.args[0], ProfileVersion: int32(c.Int("profile-version"))}
					})
			}},
	}
}

func profilesRender(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need("ID"); err != nil {
		return err
	}
	version := c.Int("profile-version")
	if version <= 0 {
		return errs.Invalid("profile-version", "--profile-version is required and must be positive")
	}
	raw, err := s.call(bettercomputev1connect.ProfilesServiceRenderProcedure,
		&v1.RenderProfileRequest{Id: s.args[0], ProfileVersion: int32(version)})
	if err != nil {
		return err
	}
	if s.out.format != "table" || s.out.query != nil {
		return s.show(raw)
	}
	var resp v1.RenderProfileResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &resp); err != nil {
		return errs.Wrap(errs.Internal, err, "decode the plan")
	}
	return writeColumns(s.stdout, planRows(resp.GetSteps()),
		[]string{"index", "use", "runsOn", "timeout", "retrySafe", "fromStep", "with"})
}

// planRows are a plan's steps as table rows: the timeout as a duration,
// the inputs as name=value sorted by name.
func planRows(steps []*v1.PlannedStep) []any {
	var rows []any
	for _, st := range steps {
		var with []string
		for k, v := range st.GetWith().AsMap() {
			with = append(with, fmt.Sprintf("%s=%v", k, v))
		}
		slices.Sort(with)
		from := st.GetFromStep()
		if f := st.GetFromFields(); len(f) > 0 {
			from += " (" + strings.Join(f, ",") + ")"
		}
		rows = append(rows, map[string]any{"index": fmt.Sprint(st.GetIndex()), "use": st.GetUse(), "runsOn": st.GetRunsOn(),
			"timeout": (time.Duration(st.GetTimeoutSeconds()) * time.Second).String(), "retrySafe": fmt.Sprint(st.GetRetrySafe()),
			"fromStep": from, "with": strings.Join(with, " ")})
	}
	return rows
}
