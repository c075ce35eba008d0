package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/agentbox/sandbox/providers"
)

// fsToolsPath is the helper the SDKs exec for their file operations. The
// emulator answers those execs itself (this is its own implementation of
// the helper's protocol): one JSON object names the operation, results go
// to stdout (the file's bytes, or JSON), and a failure exits 1 with
// {"error_kind","message"} on stderr.
const fsToolsPath = "/__modal/.bin/modal-sandbox-fs-tools"

// maxReadFile bounds ReadFile: the SDKs read the helper's output only
// once it has exited, so the emulator holds a whole file in memory.
const maxReadFile = 1 << 30

// fsRequest is the helper's argument; exactly one field is set.
type fsRequest struct {
	ReadFile      *fsPath  `json:"ReadFile"`
	WriteFile     *fsPath  `json:"WriteFile"`
	Stat          *fsPath  `json:"Stat"`
	ListFiles     *fsPath  `json:"ListFiles"`
	MakeDirectory *fsMkdir `json:"MakeDirectory"`
	Remove        *fsRm    `json:"Remove"`
	Watch         *fsWatch `json:"Watch"`
}

// fsWatch is a Watch request: a nil Filter lets every event type through,
// an empty one none; a nil TimeoutSecs watches until stdin closes.
type fsWatch struct {
	Path        string    `json:"path"`
	Recursive   bool      `json:"recursive"`
	Filter      *[]string `json:"filter"`
	TimeoutSecs *int      `json:"timeout_secs"`
}

type fsPath struct {
	Path string `json:"path"`
}

type fsMkdir struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents"`
}

type fsRm struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

// fsEntry is the helper's description of one path.
type fsEntry struct {
	Name          string  `json:"name"`
	Path          string  `json:"path"`
	Type          string  `json:"type"`
	Size          int64   `json:"size"`
	Mode          uint32  `json:"mode"`
	Permissions   string  `json:"permissions"`
	Owner         string  `json:"owner"`
	Group         string  `json:"group"`
	ModifiedTime  float64 `json:"modified_time"`
	SymlinkTarget *string `json:"symlink_target"`
}

// fsError is a failure with the helper's error kind.
type fsError struct {
	kind, msg string
}

func (e *fsError) Error() string { return e.kind + ": " + e.msg }

func entryOf(fi providers.FileInfo) fsEntry {
	// Mode is st_mode: the type bits (a regular file's here) and the
	// permissions.
	e := fsEntry{Name: fi.Name, Path: fi.Path, Type: "file", Size: fi.Size, Mode: 0o100000 | uint32(fi.Mode.Perm()),
		Permissions: fmt.Sprintf("%04o", uint32(fi.Mode.Perm())), Owner: "root", Group: "root",
		ModifiedTime: float64(fi.ModTime.UnixNano()) / 1e9}
	switch {
	case fi.Mode.IsDir():
		e.Type = "directory"
		e.Mode |= 0o040000
	case fi.Mode&fs.ModeSymlink != 0:
		e.Type = "symlink"
		e.Mode |= 0o120000
		t := fi.Target
		e.SymlinkTarget = &t
	}
	if e.Name == "" {
		e.Name = path.Base(fi.Path)
	}
	return e
}

// kindOf names a backend error in the helper's terms; invalid is the
// kind an ErrInvalid means for the operation.
func kindOf(err error, invalid string) *fsError {
	var fe *fsError
	if errors.As(err, &fe) {
		return fe
	}
	kind := "Other"
	switch {
	case errors.Is(err, providers.ErrNotFound):
		kind = "NotFound"
	case errors.Is(err, providers.ErrExists):
		kind = "PathAlreadyExists"
	case errors.Is(err, providers.ErrDenied), errors.Is(err, fs.ErrPermission):
		kind = "PermissionDenied"
	case errors.Is(err, providers.ErrInvalid):
		kind = invalid
	}
	return &fsError{kind: kind, msg: err.Error()}
}

// fsTools runs one helper request on sandbox id. A status other than 0
// comes with the error JSON on stderr; an error means the request could
// not be served (a backend failure the helper would not see).
func (s *Server) fsTools(ctx context.Context, id string, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fail := func(e *fsError) (int, error) {
		b, _ := json.Marshal(map[string]string{"error_kind": e.kind, "message": e.msg})
		_, _ = stderr.Write(b)
		return 1, nil
	}
	if len(args) != 1 {
		return fail(&fsError{"InvalidArgument", "expected one JSON argument"})
	}
	var req fsRequest
	if err := json.Unmarshal([]byte(args[0]), &req); err != nil {
		return fail(&fsError{"InvalidArgument", err.Error()})
	}
	err := s.fsServe(ctx, id, req, stdin, stdout)
	if err == nil {
		return 0, nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, providers.ErrUnavailable) {
		return 0, err
	}
	var fe *fsError
	if !errors.As(err, &fe) {
		fe = &fsError{"Other", err.Error()}
	}
	return fail(fe)
}

func (s *Server) fsServe(ctx context.Context, id string, req fsRequest, stdin io.Reader, stdout io.Writer) error {
	switch {
	case req.ReadFile != nil:
		fi, err := s.backend.Stat(ctx, id, req.ReadFile.Path)
		if err != nil {
			return kindOf(err, "NotDirectory")
		}
		if fi.IsDir() {
			return &fsError{"IsDirectory", "is a directory"}
		}
		if fi.Size > maxReadFile {
			return &fsError{"FileTooLarge", fmt.Sprintf("file is %d bytes, more than the %d the emulator reads", fi.Size, maxReadFile)}
		}
		rc, err := s.backend.ReadFile(ctx, id, req.ReadFile.Path)
		if err != nil {
			return kindOf(err, "IsDirectory")
		}
		defer rc.Close()
		if _, err := io.Copy(stdout, rc); err != nil {
			return kindOf(err, "IsDirectory")
		}
		return nil
	case req.WriteFile != nil:
		fi, err := s.backend.Stat(ctx, id, req.WriteFile.Path)
		if err == nil && fi.IsDir() {
			return &fsError{"IsDirectory", "is a directory"}
		}
		if err := s.backend.WriteFile(ctx, id, req.WriteFile.Path, stdin, 0o644); err != nil {
			return kindOf(err, "NotDirectory")
		}
		return nil
	case req.Stat != nil:
		fi, err := s.backend.Stat(ctx, id, req.Stat.Path)
		if err != nil {
			return kindOf(err, "NotDirectory")
		}
		return json.NewEncoder(stdout).Encode(entryOf(fi))
	case req.ListFiles != nil:
		infos, err := s.backend.ListDir(ctx, id, req.ListFiles.Path, 1)
		if err != nil {
			return kindOf(err, "NotDirectory")
		}
		out := make([]fsEntry, 0, len(infos))
		for _, fi := range infos {
			out = append(out, entryOf(fi))
		}
		slices.SortFunc(out, func(a, b fsEntry) int { return strings.Compare(a.Name, b.Name) })
		return json.NewEncoder(stdout).Encode(out)
	case req.MakeDirectory != nil:
		p := req.MakeDirectory.Path
		if !req.MakeDirectory.Parents {
			if _, err := s.backend.Stat(ctx, id, p); err == nil {
				return &fsError{"PathAlreadyExists", "path already exists"}
			}
			parent, err := s.backend.Stat(ctx, id, path.Dir(p))
			if err != nil {
				return kindOf(err, "NotDirectory")
			}
			if !parent.IsDir() {
				return &fsError{"NotDirectory", "parent is not a directory"}
			}
		}
		if err := s.backend.Mkdir(ctx, id, p); err != nil {
			return kindOf(err, "NotDirectory")
		}
		return nil
	case req.Remove != nil:
		recursive := req.Remove.Recursive
		if fi, err := s.backend.Stat(ctx, id, req.Remove.Path); err == nil && fi.IsDir() && !recursive {
			// The helper removes an empty directory without the flag.
			entries, err := s.backend.ListDir(ctx, id, req.Remove.Path, 1)
			if err != nil {
				return kindOf(err, "NotDirectory")
			}
			if len(entries) > 0 {
				return &fsError{"DirectoryNotEmpty", "directory not empty"}
			}
			recursive = true
		}
		if err := s.backend.Remove(ctx, id, req.Remove.Path, recursive); err != nil {
			return kindOf(err, "DirectoryNotEmpty")
		}
		return nil
	case req.Watch != nil:
		return s.watch(ctx, id, *req.Watch, stdin, stdout)
	}
	return &fsError{"InvalidArgument", fmt.Sprintf("unknown request %v", req)}
}
