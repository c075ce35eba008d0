package emulator

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/daytona/wire"
)

func (s *Server) fileRoutes(m *http.ServeMux, p string) {
	m.HandleFunc("GET "+p+"/files", s.toolbox(s.listFiles))
	m.HandleFunc("DELETE "+p+"/files", s.toolbox(s.deleteFile))
	m.HandleFunc("GET "+p+"/files/info", s.toolbox(s.fileInfo))
	m.HandleFunc("GET "+p+"/files/download", s.toolbox(s.download))
	m.HandleFunc("POST "+p+"/files/upload-v2", s.toolbox(s.uploadV2))
	m.HandleFunc("POST "+p+"/files/bulk-upload", s.toolbox(s.bulkUpload))
	m.HandleFunc("POST "+p+"/files/bulk-download", s.toolbox(s.bulkDownload))
	m.HandleFunc("POST "+p+"/files/folder", s.toolbox(s.createFolder))
	m.HandleFunc("POST "+p+"/files/move", s.toolbox(s.move))
	m.HandleFunc("POST "+p+"/files/permissions", s.toolbox(s.permissions))
	m.HandleFunc("GET "+p+"/files/find", s.toolbox(s.find))
	m.HandleFunc("GET "+p+"/files/search", s.toolbox(s.search))
	m.HandleFunc("POST "+p+"/files/replace", s.toolbox(s.replace))
}

// resolve makes a toolbox path absolute: relative paths start at the
// working directory; "" stays "" (the default).
func resolve(p string) string {
	if p == "" {
		return ""
	}
	if !strings.HasPrefix(p, "/") {
		p = workDir + "/" + p
	}
	return path.Clean(p)
}

// queryPath is a path query parameter, resolved; missing answers 400.
func queryPath(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	p := resolve(r.URL.Query().Get(name))
	if p == "" {
		writeError(w, r, http.StatusBadRequest, name+" is required", "")
		return "", false
	}
	return p, true
}

// toWire describes a path as the toolbox does.
func toWire(fi providers.FileInfo, owner string) wire.FileInfo {
	mode := fi.Mode.String()
	if fi.Mode&fs.ModeSymlink != 0 {
		mode = "L" + fi.Mode.Perm().String()[1:]
	}
	return wire.FileInfo{
		Name: fi.Name, Path: fi.Path, Size: fi.Size, Mode: mode,
		Permissions: fmt.Sprintf("%04o", uint32(fi.Mode.Perm())), IsDir: fi.IsDir(),
		Owner: owner, Group: owner,
		ModifiedAt: fi.ModTime.UTC().Format(time.RFC3339Nano), ModTime: fi.ModTime.String(),
	}
}

func (sb *sandbox) user() string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.dto.User
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	dir := resolve(r.URL.Query().Get("path"))
	if dir == "" {
		dir = workDir
	}
	depth := 1
	if v := r.URL.Query().Get("depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, r, http.StatusBadRequest, "depth must be a positive number", "")
			return
		}
		depth = n
	}
	list, err := s.backend.ListDir(r.Context(), sb.backendID, dir, depth)
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	owner := sb.user()
	out := make([]wire.FileInfo, 0, len(list))
	for _, fi := range list {
		out = append(out, toWire(fi, owner))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) fileInfo(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	fi, err := s.backend.Stat(r.Context(), sb.backendID, p)
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toWire(fi, sb.user()))
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	if p == "/" || p == workDir {
		writeError(w, r, http.StatusBadRequest, "refusing to delete "+p, "")
		return
	}
	recursive := r.URL.Query().Get("recursive") == "true"
	if err := s.backend.Remove(r.Context(), sb.backendID, p, recursive); err != nil {
		writeBackendError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createFolder(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	if err := s.backend.Mkdir(r.Context(), sb.backendID, p); err != nil {
		writeBackendError(w, r, err)
		return
	}
	if mode := r.URL.Query().Get("mode"); mode != "" && mode != "0755" && mode != "755" {
		if !s.chmod(w, r, sb, p, mode) {
			return
		}
	}
	w.WriteHeader(http.StatusCreated)
}

// chmod sets a path's mode (octal) with the backend's chmod, answering
// an error itself.
func (s *Server) chmod(w http.ResponseWriter, r *http.Request, sb *sandbox, p, mode string) bool {
	if _, err := strconv.ParseUint(mode, 8, 32); err != nil {
		writeError(w, r, http.StatusBadRequest, "mode must be octal: "+mode, "")
		return false
	}
	res, err := s.backend.Exec(r.Context(), sb.backendID, providers.ExecRequest{Argv: []string{"chmod", mode, p}})
	if err == nil && res.ExitCode != 0 {
		err = providers.Errorf(providers.ErrInvalid, "daytona emulator", "chmod "+p, "chmod exited %d", res.ExitCode)
	}
	if err != nil {
		writeBackendError(w, r, err)
		return false
	}
	return true
}

func (s *Server) permissions(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	if mode := r.URL.Query().Get("mode"); mode != "" && !s.chmod(w, r, sb, p, mode) {
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) move(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	from, ok := queryPath(w, r, "source")
	if !ok {
		return
	}
	to, ok := queryPath(w, r, "destination")
	if !ok {
		return
	}
	// Daytona's toolbox refuses to move onto an existing path.
	if _, err := s.backend.Stat(r.Context(), sb.backendID, to); err == nil {
		writeError(w, r, http.StatusConflict, "destination "+to+" already exists", "")
		return
	}
	if err := s.backend.Rename(r.Context(), sb.backendID, from, to); err != nil {
		writeBackendError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// download streams GET /files/download with its length.
func (s *Server) download(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	fi, err := s.backend.Stat(r.Context(), sb.backendID, p)
	if err == nil && fi.IsDir() {
		err = providers.Errorf(providers.ErrInvalid, "daytona emulator", "download "+p, "is a directory")
	}
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	rc, err := s.backend.ReadFile(r.Context(), sb.backendID, p)
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if fi.Mode.IsRegular() {
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

// uploadV2 writes POST /files/upload-v2: the multipart field "file" or
// the raw body.
func (s *Server) uploadV2(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	var body io.Reader = r.Body
	if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err != nil {
				writeError(w, r, http.StatusBadRequest, "no file field in the form", "")
				return
			}
			if part.FormName() == "file" {
				body = part
				break
			}
		}
	}
	if err := s.backend.WriteFile(r.Context(), sb.backendID, p, body, 0o644); err != nil {
		writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.UploadedFile{Name: path.Base(p), Path: p, Type: "file"})
}

// bulkUpload writes the files of POST /files/bulk-upload, streaming each
// part: files[i].path names where files[i].file goes.
func (s *Server) bulkUpload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "expected a multipart form: "+err.Error(), "")
		return
	}
	dest := map[string]string{}
	type uploaded struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	done := []uploaded{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, r, http.StatusBadRequest, "reading the form: "+err.Error(), "")
			return
		}
		name := part.FormName()
		key, isPath := strings.CutSuffix(name, ".path")
		if isPath {
			v, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				writeError(w, r, http.StatusBadRequest, "reading "+name+": "+err.Error(), "")
				return
			}
			dest[key] = string(v)
			continue
		}
		key, isFile := strings.CutSuffix(name, ".file")
		if !isFile {
			continue
		}
		p := resolve(dest[key])
		if p == "" {
			p = resolve(part.FileName())
		}
		if p == "" {
			writeError(w, r, http.StatusBadRequest, name+" has no destination ("+key+".path must come first)", "")
			return
		}
		cr := &countReader{r: part}
		if err := s.backend.WriteFile(r.Context(), sb.backendID, p, cr, 0o644); err != nil {
			writeBackendError(w, r, err)
			return
		}
		done = append(done, uploaded{Path: p, Bytes: cr.n})
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": done})
}

// countReader counts what passes.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// bulkDownload answers POST /files/bulk-download with one multipart part
// per path, streamed: "file" with the bytes, or "error" with a JSON error
// for a path that cannot be read; each part's filename is the path asked
// for.
func (s *Server) bulkDownload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req wire.DownloadFiles
	if !decode(w, r, &req) {
		return
	}
	mw := multipart.NewWriter(w)
	w.Header().Set("Content-Type", "multipart/form-data; boundary="+mw.Boundary())
	w.WriteHeader(http.StatusOK)
	defer mw.Close()
	for _, asked := range req.Paths {
		p := resolve(asked)
		err := s.downloadPart(r, sb, mw, asked, p)
		if err == nil {
			continue
		}
		if errors.Is(err, errPartWritten) {
			// The reply broke mid-part: end it so the client sees a cut.
			panic(http.ErrAbortHandler)
		}
		status := 500
		code := ""
		if isKind(err, providers.ErrNotFound) {
			status, code = http.StatusNotFound, wire.CodeFileNotFound
		} else if isKind(err, providers.ErrInvalid) {
			status = http.StatusBadRequest
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": wire.PartError, "filename": asked}))
		h.Set("Content-Type", "application/json")
		pw, werr := mw.CreatePart(h)
		if werr != nil {
			return
		}
		b := errorBody(r, status, err.Error(), code)
		_, _ = fmt.Fprintf(pw, `{"statusCode":%d,"message":%q,"code":%q,"source":%q}`, b.StatusCode, b.Message, b.Code, b.Source)
	}
}

// errPartWritten marks a failure after a file part began.
var errPartWritten = errors.New("part written")

func (s *Server) downloadPart(r *http.Request, sb *sandbox, mw *multipart.Writer, asked, p string) error {
	fi, err := s.backend.Stat(r.Context(), sb.backendID, p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return providers.Errorf(providers.ErrInvalid, "daytona emulator", "download "+p, "is a directory")
	}
	rc, err := s.backend.ReadFile(r.Context(), sb.backendID, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": wire.PartFile, "filename": asked}))
	h.Set("Content-Type", "application/octet-stream")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return errPartWritten
	}
	if _, err := io.Copy(pw, rc); err != nil {
		return errPartWritten
	}
	return nil
}

// find answers GET /files/find: lines matching a pattern under path.
func (s *Server) find(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	pattern := r.URL.Query().Get("pattern")
	if pattern == "" {
		writeError(w, r, http.StatusBadRequest, "pattern is required", "")
		return
	}
	g, ok := s.backend.(providers.Grepper)
	if !ok {
		writeError(w, r, http.StatusNotImplemented, "the backend cannot search file contents", "")
		return
	}
	found, err := g.Grep(r.Context(), sb.backendID, providers.GrepRequest{Pattern: pattern, Path: p, MaxMatches: 10000})
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	out := make([]wire.Match, 0, len(found))
	for _, m := range found {
		out = append(out, wire.Match{File: m.Path, Line: m.Line, Content: m.Text})
	}
	writeJSON(w, http.StatusOK, out)
}

// search answers GET /files/search: paths under path whose base name
// matches a glob.
func (s *Server) search(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := queryPath(w, r, "path")
	if !ok {
		return
	}
	pattern := r.URL.Query().Get("pattern")
	if _, err := path.Match(pattern, ""); err != nil || pattern == "" {
		writeError(w, r, http.StatusBadRequest, "pattern must be a glob", "")
		return
	}
	list, err := s.backend.ListDir(r.Context(), sb.backendID, p, 64)
	if err != nil {
		writeBackendError(w, r, err)
		return
	}
	out := wire.SearchFilesResponse{Files: []string{}}
	for _, fi := range list {
		if ok, _ := path.Match(pattern, fi.Name); ok {
			out.Files = append(out.Files, fi.Path)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// replace answers POST /files/replace: every occurrence of a text
// replaced in each file, one result per file.
func (s *Server) replace(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req wire.ReplaceRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Pattern == "" {
		writeError(w, r, http.StatusBadRequest, "pattern is required", "")
		return
	}
	out := make([]wire.ReplaceResult, 0, len(req.Files))
	for _, f := range req.Files {
		p := resolve(f)
		err := s.replaceIn(r, sb, p, req.Pattern, req.NewValue)
		res := wire.ReplaceResult{File: f, Success: err == nil}
		if err != nil {
			res.Error = err.Error()
		}
		out = append(out, res)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxReplaceSize bounds a file replace reads into memory.
const maxReplaceSize = 64 << 20

func (s *Server) replaceIn(r *http.Request, sb *sandbox, p, pattern, value string) error {
	fi, err := s.backend.Stat(r.Context(), sb.backendID, p)
	if err != nil {
		return err
	}
	if fi.Size > maxReplaceSize {
		return fmt.Errorf("%s is larger than %d bytes", p, maxReplaceSize)
	}
	rc, err := s.backend.ReadFile(r.Context(), sb.backendID, p)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxReplaceSize+1))
	rc.Close()
	if err != nil {
		return err
	}
	text := strings.ReplaceAll(string(data), pattern, value)
	if text == string(data) {
		return nil
	}
	return s.backend.WriteFile(r.Context(), sb.backendID, p, strings.NewReader(text), fi.Mode.Perm())
}
