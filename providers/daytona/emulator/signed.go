package emulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	shared "github.com/agentbox/sandbox/providers/emulator"
)

// Signed file URLs: GET …/files/download and POST …/files/upload-v2 of a
// sandbox's toolbox are accepted without the API key when their query
// carries path, expires (Unix seconds, 0 for never) and a signature made
// with the sandbox's signing key, as the SDKs' downloadUrl and uploadUrl
// build them.

// signaturePrefix is the version prefix of a file URL signature.
const signaturePrefix = "v1_"

// fileURLSignature signs one method on one path until expires.
func fileURLSignature(key, method, path, expires string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte("v1:files:" + method + ":" + path + ":" + expires))
	return signaturePrefix + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// signedURL reports a toolbox file request whose signature is valid.
func (s *Server) signedURL(r *http.Request) bool {
	q := r.URL.Query()
	sig := q.Get("signature")
	rest, ok := strings.CutPrefix(r.URL.Path, "/toolbox/")
	if sig == "" || !ok {
		return false
	}
	id, op, ok := strings.Cut(rest, "/")
	switch {
	case !ok:
		return false
	case op == "files/download" && r.Method == http.MethodGet, op == "files/upload-v2" && r.Method == http.MethodPost:
	default:
		return false
	}
	expires := q.Get("expires")
	n, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || n < 0 || n != 0 && s.opts.Now().Unix() > n {
		return false
	}
	sb, err := s.lookup(r.Context(), id)
	if err != nil {
		return false
	}
	sb.mu.Lock()
	key := sb.signingKey
	sb.mu.Unlock()
	want := fileURLSignature(key, r.Method, q.Get("path"), expires)
	return hmac.Equal([]byte(sig), []byte(want))
}

// signingKey answers the sandbox's signing key (a JSON string).
func (s *Server) signingKey(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	sb.mu.Lock()
	key := sb.signingKey
	sb.mu.Unlock()
	writeJSON(w, http.StatusOK, key)
}

// rotateSigningKey replaces the signing key, invalidating every URL
// signed before.
func (s *Server) rotateSigningKey(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	key := shared.RandomHex(32)
	sb.mu.Lock()
	sb.signingKey = key
	sb.mu.Unlock()
	writeJSON(w, http.StatusOK, key)
}
