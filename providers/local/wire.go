//go:build linux

package local

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"time"

	"github.com/agentbox/sandbox/providers"
)

// The messages between the host, an init and its runners (configurations,
// status messages, a machine's requests, replies and gate) pass only
// between processes of this one binary: a machine's socket name carries
// the binary's identity, and runners are started from the init's own
// executable. So they are encoded by hand instead of with encoding/json,
// whose first use of a type costs a process hundreds of microseconds of
// reflection (initConfig alone), and every CLI call and every runner is a
// new process that paid it for each type.
//
// A message is a frame: its length (4 bytes, big-endian) and its body, the
// fields in the order of its encode function, integers as varints, strings
// and lists with their length first, optional parts behind a presence
// byte. A decoder reads exactly the fields its encoder wrote, or fails with
// errFrame; wire_test.go fills every field of every message to prove that
// none is forgotten.

// maxFrame bounds a frame's body against a corrupt length. It is far
// above what the kernel can execute (an argv and an environment of a few
// megabytes): a command too large to run reaches the runner, whose exec
// fails with the kernel's reason.
const maxFrame = 1 << 30

// smallFrame is the size up to which a frame's body is allocated at once;
// a larger one grows as its bytes come.
const smallFrame = 64 << 10

// errFrame says that a frame ended before its fields did, or held a
// value out of range.
var errFrame = errors.New("malformed message")

// appendFrame appends body, framed, to b.
func appendFrame(b, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// readFrame reads one frame's body from r, which it reads no further.
func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("a message of %d bytes: %w", size, errFrame)
	}
	if size > smallFrame {
		body, err := io.ReadAll(io.LimitReader(r, int64(size)))
		if err == nil && len(body) < int(size) {
			err = io.ErrUnexpectedEOF
		}
		return body, err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// wireWriter appends fields to a message body.
type wireWriter struct{ b []byte }

func (w *wireWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *wireWriter) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }

func (w *wireWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *wireWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *wireWriter) strs(ss []string) {
	w.uint(uint64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// wireReader reads fields from a message body; the first error sticks,
// and every read after it returns a zero value.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail() { r.err, r.b = errFrame, nil }

func (r *wireReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads what binary.AppendVarint wrote: a zig-zag encoded uvarint.
func (r *wireReader) int() int64 {
	u := r.uint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// count reads a length that must fit in what is left, each element
// taking at least one byte.
func (r *wireReader) count() int {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(n)
}

// readList reads a count and that many items with one (nil for none).
func readList[T any](r *wireReader, one func() T) []T {
	n := r.count()
	if n == 0 {
		return nil
	}
	list := make([]T, n)
	for i := range list {
		list[i] = one()
	}
	return list
}

func (r *wireReader) cgroupPaths() []cgroupPath {
	return readList(r, func() cgroupPath { return cgroupPath{Dir: r.str(), Name: r.str(), Val: r.str()} })
}

// goInt reads an int: what the platform's int holds (a pid, a depth, a
// count), as encoding/json decoded it.
func (r *wireReader) goInt() int {
	v := r.int()
	if v < math.MinInt || v > math.MaxInt {
		r.fail()
		return 0
	}
	return int(v)
}

func (r *wireReader) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 || r.b[0] > 1 {
		r.fail()
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

func (r *wireReader) str() string {
	n := r.count()
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *wireReader) strs() []string {
	return readList(r, r.str)
}

// end says whether the whole body was read without error.
func (r *wireReader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	return r.err
}

// encodeConfig encodes cfg's exported fields but Resources, which only
// the host uses.
func encodeConfig(cfg *initConfig) []byte {
	w := &wireWriter{b: make([]byte, 0, 512)}
	w.str(cfg.Mode)
	w.str(cfg.Root)
	w.str(cfg.Skel)
	w.layer(cfg.RootLayer)
	w.uint(uint64(len(cfg.Layers)))
	for _, l := range cfg.Layers {
		w.layer(l)
	}
	w.str(cfg.Trash)
	w.bool(cfg.Spread)
	w.uint(uint64(len(cfg.Links)))
	for _, l := range cfg.Links {
		w.str(l.Name)
		w.str(l.Target)
	}
	w.str(cfg.Workspace)
	w.str(cfg.HomeSrc)
	w.str(cfg.Home)
	w.bool(cfg.SharedNet)
	w.strs(cfg.Masks)
	l := cfg.Limits
	for _, v := range []uint64{l.NProc, l.Data, l.FSize, l.TmpSize, l.ShmSize, l.RunSize, l.Disk, l.DiskReserve} {
		w.uint(v)
	}
	w.bool(l.DataSoft)
	w.bool(l.NoCores)
	w.bool(cfg.Weak)
	w.str(cfg.TmpSrc)
	w.strs(cfg.WeakHidden)
	w.bool(cfg.Gated)
	w.strs(cfg.Argv)
	w.strs(cfg.Env)
	w.str(cfg.Cwd)
	w.bool(cfg.Background)
	w.bool(cfg.TTY)
	w.str(cfg.User)
	w.bool(cfg.KeepHome)
	w.bool(cfg.SetID)
	w.str(cfg.DefaultUser)
	w.bool(cfg.File != nil)
	if f := cfg.File; f != nil {
		w.str(f.Op)
		w.str(f.Path)
		w.str(f.To)
		w.uint(uint64(f.Mode))
		w.int(int64(f.Depth))
		w.bool(f.Recursive)
		w.bool(f.Grep != nil)
		if g := f.Grep; g != nil {
			w.str(g.Pattern)
			w.str(g.Path)
			w.str(g.Glob)
			w.bool(g.IgnoreCase)
			w.int(int64(g.MaxMatches))
		}
		w.bool(f.Direct)
		w.int(f.MTime)
		w.bool(f.NoFollow)
	}
	w.int(cfg.IdleNS)
	w.int(int64(cfg.HostPID))
	w.uint(cfg.HostStart)
	w.cgroupPaths(cfg.Cgroups)
	w.str(cfg.CgroupRoot)
	w.cgroupPaths(cfg.WorkCgroups)
	w.bool(cfg.Nice)
	w.int(cfg.SettleNS)
	w.str(cfg.Socket)
	return w.b
}

func (w *wireWriter) cgroupPaths(list []cgroupPath) {
	w.uint(uint64(len(list)))
	for _, c := range list {
		w.str(c.Dir)
		w.str(c.Name)
		w.str(c.Val)
	}
}

func (w *wireWriter) layer(l mountLayer) {
	w.str(l.Name)
	w.str(l.Lower)
	w.str(l.Base)
	w.str(l.Upper)
	w.str(l.Work)
	w.bool(l.Volatile)
}

func (r *wireReader) layer() mountLayer {
	return mountLayer{Name: r.str(), Lower: r.str(), Base: r.str(), Upper: r.str(), Work: r.str(), Volatile: r.bool()}
}

// decodeConfig decodes what encodeConfig encoded.
func decodeConfig(b []byte) (initConfig, error) {
	r := &wireReader{b: b}
	var cfg initConfig
	cfg.Mode = r.str()
	cfg.Root = r.str()
	cfg.Skel = r.str()
	cfg.RootLayer = r.layer()
	cfg.Layers = readList(r, r.layer)
	cfg.Trash = r.str()
	cfg.Spread = r.bool()
	cfg.Links = readList(r, func() link {
		return link{Name: r.str(), Target: r.str()}
	})
	cfg.Workspace = r.str()
	cfg.HomeSrc = r.str()
	cfg.Home = r.str()
	cfg.SharedNet = r.bool()
	cfg.Masks = r.strs()
	l := &cfg.Limits
	for _, v := range []*uint64{&l.NProc, &l.Data, &l.FSize, &l.TmpSize, &l.ShmSize, &l.RunSize, &l.Disk, &l.DiskReserve} {
		*v = r.uint()
	}
	l.DataSoft = r.bool()
	l.NoCores = r.bool()
	cfg.Weak = r.bool()
	cfg.TmpSrc = r.str()
	cfg.WeakHidden = r.strs()
	cfg.Gated = r.bool()
	cfg.Argv = r.strs()
	cfg.Env = r.strs()
	cfg.Cwd = r.str()
	cfg.Background = r.bool()
	cfg.TTY = r.bool()
	cfg.User = r.str()
	cfg.KeepHome = r.bool()
	cfg.SetID = r.bool()
	cfg.DefaultUser = r.str()
	if r.bool() {
		f := &fileRequest{Op: r.str(), Path: r.str(), To: r.str()}
		mode := r.uint()
		if mode > math.MaxUint32 {
			r.fail()
		}
		f.Mode = fs.FileMode(mode)
		f.Depth = r.goInt()
		f.Recursive = r.bool()
		if r.bool() {
			f.Grep = &providers.GrepRequest{Pattern: r.str(), Path: r.str(), Glob: r.str(), IgnoreCase: r.bool(), MaxMatches: r.goInt()}
		}
		f.Direct = r.bool()
		f.MTime = r.int()
		f.NoFollow = r.bool()
		cfg.File = f
	}
	cfg.IdleNS = r.int()
	cfg.HostPID = r.goInt()
	cfg.HostStart = r.uint()
	cfg.Cgroups = r.cgroupPaths()
	cfg.CgroupRoot = r.str()
	cfg.WorkCgroups = r.cgroupPaths()
	cfg.Nice = r.bool()
	cfg.SettleNS = r.int()
	cfg.Socket = r.str()
	if err := r.end(); err != nil {
		return initConfig{}, fmt.Errorf("decode configuration: %w", err)
	}
	return cfg, nil
}

// writeConfig writes cfg, framed, to w in one write.
func writeConfig(w io.Writer, cfg *initConfig) error {
	return writeAll(w, appendFrame(nil, encodeConfig(cfg)))
}

// readConfig reads a configuration that writeConfig wrote.
func readConfig(r *bufio.Reader) (initConfig, error) {
	body, err := readFrame(r)
	if err != nil {
		return initConfig{}, fmt.Errorf("read configuration: %w", err)
	}
	return decodeConfig(body)
}

func (w *wireWriter) optInt(p *int) {
	w.bool(p != nil)
	if p != nil {
		w.int(int64(*p))
	}
}

func (r *wireReader) optInt() *int {
	if !r.bool() {
		return nil
	}
	v := r.goInt()
	return &v
}

// time encodes t with its zone's offset, as time.MarshalBinary does; a
// zone it cannot encode (an offset in seconds) goes as UTC.
func (w *wireWriter) time(t time.Time) {
	b, err := t.MarshalBinary()
	if err != nil {
		b, _ = t.UTC().MarshalBinary()
	}
	w.uint(uint64(len(b)))
	w.b = append(w.b, b...)
}

func (r *wireReader) time() time.Time {
	n := r.count()
	if r.err != nil {
		return time.Time{}
	}
	var t time.Time
	if err := t.UnmarshalBinary(r.b[:n]); err != nil {
		r.fail()
		return time.Time{}
	}
	r.b = r.b[n:]
	return t
}

func (w *wireWriter) fileInfo(fi providers.FileInfo) {
	w.str(fi.Path)
	w.str(fi.Name)
	w.int(fi.Size)
	w.uint(uint64(fi.Mode))
	w.time(fi.ModTime)
	w.str(fi.Target)
}

func (r *wireReader) fileInfo() providers.FileInfo {
	fi := providers.FileInfo{Path: r.str(), Name: r.str(), Size: r.int()}
	fi.Mode = r.fileMode()
	fi.ModTime = r.time()
	fi.Target = r.str()
	return fi
}

func (r *wireReader) fileMode() fs.FileMode {
	v := r.uint()
	if v > math.MaxUint32 {
		r.fail()
		return 0
	}
	return fs.FileMode(v)
}

// encodeStatus encodes a status message.
func encodeStatus(m *statusMsg) []byte {
	w := &wireWriter{b: make([]byte, 0, 64)}
	w.optInt(m.Exit)
	w.int(int64(m.PID))
	w.bool(m.Open)
	w.bool(m.Done)
	w.str(m.Err)
	w.bool(m.Setup)
	w.str(m.Kind)
	w.int(int64(m.Errno))
	w.int(int64(m.Landlock))
	w.bool(m.Forked)
	w.bool(m.Info != nil)
	if m.Info != nil {
		w.fileInfo(*m.Info)
	}
	w.uint(uint64(len(m.Infos)))
	for _, fi := range m.Infos {
		w.fileInfo(fi)
	}
	w.uint(uint64(len(m.Matches)))
	for _, g := range m.Matches {
		w.str(g.Path)
		w.int(int64(g.Line))
		w.str(g.Text)
	}
	return w.b
}

// decodeStatus decodes what encodeStatus encoded.
func decodeStatus(b []byte) (statusMsg, error) {
	r := &wireReader{b: b}
	var m statusMsg
	m.Exit = r.optInt()
	m.PID = r.goInt()
	m.Open = r.bool()
	m.Done = r.bool()
	m.Err = r.str()
	m.Setup = r.bool()
	m.Kind = r.str()
	m.Errno = r.goInt()
	m.Landlock = r.goInt()
	m.Forked = r.bool()
	if r.bool() {
		fi := r.fileInfo()
		m.Info = &fi
	}
	m.Infos = readList(r, r.fileInfo)
	m.Matches = readList(r, func() providers.GrepMatch {
		return providers.GrepMatch{Path: r.str(), Line: r.goInt(), Text: r.str()}
	})
	if err := r.end(); err != nil {
		return statusMsg{}, fmt.Errorf("decode status: %w", err)
	}
	return m, nil
}

// readStatus reads one framed status message.
func readStatus(r io.Reader) (statusMsg, error) {
	body, err := readFrame(r)
	if err != nil {
		return statusMsg{}, err
	}
	return decodeStatus(body)
}

// encodeRequest encodes a request to a machine.
func encodeRequest(q *machineRequest) []byte {
	w := &wireWriter{b: make([]byte, 0, 32)}
	w.int(int64(q.Version))
	w.str(q.Op)
	w.bool(q.Shared)
	w.bool(q.Any)
	w.str(q.User)
	w.bool(q.Background)
	w.int(int64(q.PID))
	w.int(int64(q.Signal))
	w.bool(q.Follow)
	w.int(q.GraceNS)
	return w.b
}

// decodeRequest decodes what encodeRequest encoded.
func decodeRequest(b []byte) (machineRequest, error) {
	r := &wireReader{b: b}
	q := machineRequest{Version: r.goInt(), Op: r.str(), Shared: r.bool(), Any: r.bool(), User: r.str(),
		Background: r.bool(), PID: r.goInt(), Signal: r.goInt(), Follow: r.bool(), GraceNS: r.int()}
	if err := r.end(); err != nil {
		return machineRequest{}, fmt.Errorf("decode request: %w", err)
	}
	return q, nil
}

// encodeReply encodes a machine's reply.
func encodeReply(h *machineReply) []byte {
	w := &wireWriter{b: make([]byte, 0, 32)}
	w.bool(h.Started)
	w.str(h.Exit)
	w.str(h.Err)
	w.bool(h.Setup)
	w.str(h.Kind)
	w.uint(uint64(len(h.Procs)))
	for _, p := range h.Procs {
		w.int(int64(p.PID))
		w.int(int64(p.PPID))
		w.str(p.Name)
		w.strs(p.Argv)
		w.int(int64(p.UID))
		w.str(p.State)
		w.time(p.Started)
		w.bool(p.Background)
		w.optInt(p.ExitCode)
	}
	w.bool(h.Done)
	w.optInt(h.Code)
	return w.b
}

// decodeReply decodes what encodeReply encoded.
func decodeReply(b []byte) (machineReply, error) {
	r := &wireReader{b: b}
	h := machineReply{Started: r.bool(), Exit: r.str(), Err: r.str(), Setup: r.bool(), Kind: r.str()}
	h.Procs = readList(r, func() providers.Process {
		return providers.Process{PID: r.goInt(), PPID: r.goInt(), Name: r.str(), Argv: r.strs(), UID: r.goInt(),
			State: r.str(), Started: r.time(), Background: r.bool(), ExitCode: r.optInt()}
	})
	h.Done = r.bool()
	h.Code = r.optInt()
	if err := r.end(); err != nil {
		return machineReply{}, fmt.Errorf("machine reply: %w", err)
	}
	return h, nil
}

// encodeGate encodes a machine's gate.
func encodeGate(g *machineGate) []byte {
	w := &wireWriter{}
	w.strs(g.Masks)
	return w.b
}

// decodeGate decodes what encodeGate encoded.
func decodeGate(b []byte) (machineGate, error) {
	r := &wireReader{b: b}
	g := machineGate{Masks: r.strs()}
	if err := r.end(); err != nil {
		return machineGate{}, fmt.Errorf("decode the machine's start: %w", err)
	}
	return g, nil
}
