package emulator

import (
	"errors"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/runloop/wire"
)

// readFileContents answers with a file's bytes as text.
func (s *Server) readFileContents(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body wire.ReadFileContents
	if !readJSON(w, r, &body) {
		return
	}
	s.sendFile(w, r, d, body.FilePath, "text/plain; charset=utf-8")
}

// downloadFile answers with a file's bytes.
func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body wire.DownloadFile
	if !readJSON(w, r, &body) {
		return
	}
	s.sendFile(w, r, d, body.Path, "application/octet-stream")
}

// sendFile streams the file p of d, with its length.
func (s *Server) sendFile(w http.ResponseWriter, r *http.Request, d *devbox, p, contentType string) {
	abs, err := d.resolve(p)
	if err != nil {
		writeKindError(w, err)
		return
	}
	fi, err := s.backend.Stat(r.Context(), d.backendID, abs)
	if err != nil {
		writeKindError(w, err)
		return
	}
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, p+" is a directory")
		return
	}
	rc, err := s.backend.ReadFile(r.Context(), d.backendID, abs)
	if err != nil {
		writeKindError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", contentType)
	if fi.Mode.IsRegular() {
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		// The reply is under way: only a cut connection can tell.
		panic(http.ErrAbortHandler)
	}
}

// writeFileContents writes a text file, creating its parents.
func (s *Server) writeFileContents(w http.ResponseWriter, r *http.Request, d *devbox) {
	var body wire.WriteFileContents
	if !readJSON(w, r, &body) {
		return
	}
	abs, err := d.resolve(body.FilePath)
	if err != nil {
		writeKindError(w, err)
		return
	}
	if err := s.backend.WriteFile(r.Context(), d.backendID, abs, strings.NewReader(body.Contents), 0o644); err != nil {
		writeKindError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ExecutionDetail{DevboxID: d.id})
}

// uploadFile writes the "file" part of a multipart form to the "path"
// field, streamed into the backend; a body that breaks off leaves nothing.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request, d *devbox) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeError(w, http.StatusBadRequest, "upload_file wants a multipart/form-data body")
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad multipart body: "+err.Error())
		return
	}
	path := ""
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "upload_file wants the fields path and file")
			return
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad multipart body: "+err.Error())
			return
		}
		switch part.FormName() {
		case "path":
			b, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				writeError(w, http.StatusBadRequest, "bad multipart body: "+err.Error())
				return
			}
			path = string(b)
		case "file":
			if path == "" {
				writeError(w, http.StatusBadRequest, "upload_file wants the path field before the file")
				return
			}
			s.writeUpload(w, r, d, path, part)
			return
		}
		_ = part.Close()
	}
}

// writeUpload streams one uploaded file into the backend.
func (s *Server) writeUpload(w http.ResponseWriter, r *http.Request, d *devbox, path string, part *multipart.Part) {
	abs, err := d.resolve(path)
	if err != nil {
		writeKindError(w, err)
		return
	}
	if err := s.backend.WriteFile(r.Context(), d.backendID, abs, part, fs.FileMode(0o644)); err != nil {
		if !errors.Is(err, providers.ErrNotFound) && r.Context().Err() != nil {
			return
		}
		writeKindError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}
