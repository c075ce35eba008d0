package emulator

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/sandbox/providers"
	"github.com/agentbox/sandbox/providers/e2b/wire"
)

// Replies of /files to a request that is not allowed.
const (
	msgUnauthorized = "unauthorized access, please provide a valid access token or method signing if supported"
	msgExpired      = "signature is already expired"
	msgBadSignature = "invalid signature"
)

// signatureOf computes a URL signature as the SDKs do:
// "v1_" + base64(sha256("<path>:<op>:<user>:<token>[:<expiry>]")).
func signatureOf(q url.Values, op, token string) string {
	msg := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + token
	if exp := q.Get("signature_expiration"); exp != "" {
		msg += ":" + exp
	}
	sum := sha256.Sum256([]byte(msg))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// fileOp is the operation a /files request signs.
func fileOp(r *http.Request) string {
	if r.Method == http.MethodPost {
		return "write"
	}
	return "read"
}

// filesAllowed checks /files access: the access token, or a valid URL
// signature that has not expired. It returns "" when allowed, else the
// message of the 401.
func filesAllowed(r *http.Request, sb *sandbox, now time.Time) string {
	if sb.token == "" || sameSecret(r.Header.Get(wire.HeaderAccessToken), sb.token) {
		return ""
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return msgUnauthorized
	}
	if !sameSecret(sig, signatureOf(q, fileOp(r), sb.token)) {
		return msgBadSignature
	}
	if exp := q.Get("signature_expiration"); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return msgBadSignature
		}
		if now.Unix() > n {
			return msgExpired
		}
	}
	return ""
}

// bySignature finds the sandbox whose access token signed a /files URL
// that names no sandbox: the SDKs build signed URLs on E2B_SANDBOX_URL
// without a sandbox host, and the signature is the only thing that tells
// the sandbox.
func (s *Server) bySignature(r *http.Request) *sandbox {
	q := r.URL.Query()
	sig := q.Get("signature")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range s.sandboxes {
		if sb.token != "" && sameSecret(sig, signatureOf(q, fileOp(r), sb.token)) {
			return sb
		}
	}
	return nil
}

// handleDownload streams a file: GET /files?path=.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	if msg := filesAllowed(r, sb, s.now()); msg != "" {
		writeAPIError(w, http.StatusUnauthorized, msg)
		return
	}
	who, rerr := s.identityOf(r, sb)
	if rerr != nil {
		writeAPIError(w, http.StatusUnauthorized, rerr.Message)
		return
	}
	p, err := who.resolve(r.URL.Query().Get("path"))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	if who.exec != "" {
		s.readAs(w, r, sb, who, p)
		return
	}
	fi, err := s.backend.Stat(r.Context(), sb.backendID, p)
	if err != nil {
		if errors.Is(err, providers.ErrNotFound) {
			writeAPIError(w, http.StatusNotFound, "path '"+p+"' does not exist")
			return
		}
		writeAPIError(w, statusOf(err), err.Error())
		return
	}
	if fi.IsDir() {
		writeAPIError(w, http.StatusBadRequest, "path '"+p+"' is a directory")
		return
	}
	rc, err := s.backend.ReadFile(r.Context(), sb.backendID, p)
	if err != nil {
		writeAPIError(w, statusOf(err), err.Error())
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(p)}))
	if fi.Mode.IsRegular() {
		h.Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	// A failure mid-way cuts the connection, which the client sees as a
	// short body against Content-Length.
	if _, err := io.Copy(w, rc); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// handleUpload writes files: POST /files with a raw body
// (application/octet-stream, path required) or multipart parts named
// "file" (the path, else each part's file name, is the destination).
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	if msg := filesAllowed(r, sb, s.now()); msg != "" {
		writeAPIError(w, http.StatusUnauthorized, msg)
		return
	}
	who, rerr := s.identityOf(r, sb)
	if rerr != nil {
		writeAPIError(w, http.StatusUnauthorized, rerr.Message)
		return
	}
	qpath := r.URL.Query().Get("path")
	md, err := uploadMetadata(r.Header)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []wire.UploadedEntry
	write := func(dst string, body io.Reader) bool {
		p, err := who.resolve(dst)
		if err != nil {
			writeAPIError(w, http.StatusBadRequest, err.Error())
			return false
		}
		err = s.writeFile(r.Context(), sb, who, p, body)
		if err == nil && md != nil {
			err = s.setMetadata(r.Context(), sb, who, p, md)
		}
		if err == nil {
			sb.settleWatches(r.Context(), p)
		}
		if err != nil {
			status := statusOf(err)
			if errors.Is(err, providers.ErrQuota) {
				status = http.StatusInsufficientStorage
			}
			writeAPIError(w, status, "writing "+p+": "+err.Error())
			return false
		}
		written = append(written, wire.UploadedEntry{Path: p, Name: path.Base(p), Type: "file", Metadata: md})
		return true
	}
	switch mt {
	case "application/octet-stream":
		if qpath == "" {
			writeAPIError(w, http.StatusBadRequest, "the path query parameter is required for application/octet-stream uploads")
			return
		}
		var body io.Reader = r.Body
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, "invalid gzip body: "+err.Error())
				return
			}
			defer zr.Close()
			body = zr
		}
		if !write(qpath, body) {
			return
		}
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		seen := map[string]bool{}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, "reading the multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				part.Close()
				continue
			}
			dst := qpath
			if dst == "" {
				// The full file name, not part.FileName's base name:
				// multi-file uploads name each destination path.
				_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				dst = cd["filename"]
			}
			if dst == "" {
				writeAPIError(w, http.StatusBadRequest, "a file part has no destination: give the path parameter or a file name")
				return
			}
			if seen[dst] {
				writeAPIError(w, http.StatusBadRequest, "two parts write the same path "+dst)
				return
			}
			seen[dst] = true
			ok := write(dst, part)
			part.Close()
			if !ok {
				return
			}
		}
		if len(written) == 0 {
			writeAPIError(w, http.StatusBadRequest, "no part named file in the upload")
			return
		}
	default:
		writeAPIError(w, http.StatusBadRequest, "unsupported content type "+strconv.Quote(r.Header.Get("Content-Type"))+": use multipart/form-data or application/octet-stream")
		return
	}
	writeJSON(w, http.StatusOK, written)
}
