package demo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/klauspost/compress/zstd"
)

// ImageServer serves the demo's OS image, as an operator's image store would:
// a zstd-compressed raw disk image that is partly data, mostly zeros.
type ImageServer struct {
	URL    string
	Digest string // sha256:<hex> of the compressed file
	Size   int64  // bytes of the compressed file
	Raw    int64  // bytes of the image
	srv    *http.Server
}

// NewImageServer builds an image of size bytes and serves it on loopback.
func NewImageServer(size int64) (*ImageServer, error) {
	raw := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	copy(raw, "BCDEMO-OS-IMAGE\n")
	// 1 MiB of data every 8 MiB; the rest stays zero, like a fresh filesystem.
	for off := int64(4096); off+1<<20 <= size; off += 8 << 20 {
		for i := off; i < off+1<<20; i += 8 {
			v := rng.Uint64() & 0x0f0f0f0f0f0f0f0f // compressible, not trivial
			for j := int64(0); j < 8; j++ {
				raw[i+j] = byte(v >> (8 * j))
			}
		}
	}
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return nil, err
	}
	if _, err := enc.Write(raw); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	file := buf.Bytes()
	sum := sha256.Sum256(file)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/demo-os.raw.zst", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "demo-os.raw.zst", time.Unix(0, 0), bytes.NewReader(file))
	})
	s := &ImageServer{URL: "http://" + ln.Addr().String() + "/images/demo-os.raw.zst",
		Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(file)), Raw: size,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return s, nil
}

// Close stops serving.
func (s *ImageServer) Close() { _ = s.srv.Close() }
