package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Content types of the Connect protocol with JSON.
const (
	ContentTypeUnary  = "application/json"
	ContentTypeStream = "application/connect+json"
)

// Envelope flags of Connect streams.
const (
	// FlagCompressed marks a compressed message (never sent: no
	// compression is advertised).
	FlagCompressed byte = 0x01
	// FlagEndStream marks the last envelope, which holds an EndStream.
	FlagEndStream byte = 0x02
)

// MaxEnvelope bounds one envelope's payload when reading, so a corrupt
// length prefix cannot make a reader allocate gigabytes.
const MaxEnvelope = 16 << 20

// WriteEnvelope writes one envelope: a flag byte, a big-endian length and
// the payload.
func WriteEnvelope(w io.Writer, flags byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// WriteMessage writes v as a JSON message envelope.
func WriteMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteEnvelope(w, 0, b)
}

// ReadEnvelope reads one envelope. At a clean end of input it returns
// io.EOF; a stream cut inside an envelope returns io.ErrUnexpectedEOF.
func ReadEnvelope(r io.Reader) (flags byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxEnvelope {
		return 0, nil, fmt.Errorf("connect envelope of %d bytes exceeds the %d byte limit", n, MaxEnvelope)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

// EndStream is the payload of the last envelope of a stream.
type EndStream struct {
	Error *Error `json:"error,omitempty"`
}

// Error is a Connect error: a code name and a message.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Error formats as "code: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Connect error codes.
const (
	CodeCanceled           = "canceled"
	CodeUnknown            = "unknown"
	CodeInvalidArgument    = "invalid_argument"
	CodeDeadlineExceeded   = "deadline_exceeded"
	CodeNotFound           = "not_found"
	CodeAlreadyExists      = "already_exists"
	CodePermissionDenied   = "permission_denied"
	CodeResourceExhausted  = "resource_exhausted"
	CodeFailedPrecondition = "failed_precondition"
	CodeAborted            = "aborted"
	CodeOutOfRange         = "out_of_range"
	CodeUnimplemented      = "unimplemented"
	CodeInternal           = "internal"
	CodeUnavailable        = "unavailable"
	CodeDataLoss           = "data_loss"
	CodeUnauthenticated    = "unauthenticated"
)

// HTTPStatus is the status a unary Connect error is sent with.
func HTTPStatus(code string) int {
	switch code {
	case CodeCanceled:
		return 499
	case CodeInvalidArgument, CodeFailedPrecondition, CodeOutOfRange:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodePermissionDenied:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeAlreadyExists, CodeAborted:
		return http.StatusConflict
	case CodeResourceExhausted:
		return http.StatusTooManyRequests
	case CodeUnimplemented:
		return http.StatusNotImplemented
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// CodeForStatus is the Connect code a client infers from an HTTP status
// when the body is not a Connect error (a proxy's reply, for example).
func CodeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeAborted
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return CodeUnavailable
	default:
		return CodeUnknown
	}
}
