package pxe

import (
	"bytes"
	"io"
	"slices"
	"strings"

	"github.com/pin/tftp/v3"

	"github.com/better-compute/better-compute/errs"
)

// tftpBlockSize caps the negotiated block size: an Ethernet frame's
// payload less the IP, UDP and TFTP headers (1500-20-8-4).
const tftpBlockSize = 1468

// serveTFTP serves the iPXE binaries, read-only: writes are refused by
// having no write handler. Single-port mode keeps every transfer on the
// socket bound to the provisioning interface (no per-transfer ports for a
// firewall to open, none bound outside the interface).
func (s *Server) newTFTP() *tftp.Server {
	srv := tftp.NewServer(s.readFile, nil)
	srv.EnableSinglePort()
	srv.SetBlockSize(tftpBlockSize)
	srv.SetHook(tftpLog{s})
	return srv
}

func (s *Server) serveTFTP(srv *tftp.Server, fail func(error)) {
	defer s.wg.Done()
	if err := srv.Serve(s.tftpConn); err != nil && !s.isClosed() {
		fail(errs.Wrap(errs.Unavailable, err, "TFTP stopped on %s", s.cfg.Interface))
	}
}

// readFile sends one of the iPXE binaries by its name; anything else, a
// path into a directory included, is not found. blksize and tsize are
// negotiated by the library (tsize from the size set here).
func (s *Server) readFile(name string, rf io.ReaderFrom) error {
	b, ok := s.files[strings.TrimPrefix(name, "/")]
	if !ok {
		s.log.Info("TFTP request refused", "file", name)
		return errs.New(errs.NotFound, "%q not found; this server has only %s", name, strings.Join(s.names(), " and "))
	}
	if ot, ok := rf.(tftp.OutgoingTransfer); ok {
		ot.SetSize(int64(len(b)))
	}
	_, err := rf.ReadFrom(bytes.NewReader(b))
	return err
}

func (s *Server) names() []string {
	var out []string
	for n := range s.files {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// tftpLog logs each transfer's end.
type tftpLog struct{ s *Server }

func (h tftpLog) OnSuccess(st tftp.TransferStats) {
	h.s.log.Info("TFTP sent", "file", st.Filename, "to", st.RemoteAddr.String(), "datagrams", st.DatagramsSent, "duration", st.Duration)
}

func (h tftpLog) OnFailure(st tftp.TransferStats, err error) {
	if h.s.isClosed() || err == nil {
		return
	}
	h.s.log.Debug("TFTP transfer failed", "file", st.Filename, "to", st.RemoteAddr, "err", err)
}
