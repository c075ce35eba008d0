// Package wire holds the messages of E2B's two APIs, shared by the e2b
// client and its emulator: the control plane (REST with JSON, described by
// E2B's openapi.yml) and envd, the daemon inside every sandbox (Connect RPC
// with JSON for the process and filesystem services, plain HTTP for /files).
//
// The field names follow the published API descriptions; the Connect layer
// is written by hand (see connect.go) so that the JSON follows protojson's
// rules: lowerCamelCase keys, zero values omitted, bytes as base64, int64 as
// strings, enums by name and timestamps in RFC 3339.
package wire

import "time"

// Header names used across both APIs.
const (
	// HeaderAPIKey carries the control-plane API key.
	HeaderAPIKey = "X-API-Key"
	// HeaderAccessToken carries a sandbox's envdAccessToken to envd.
	HeaderAccessToken = "X-Access-Token"
	// HeaderSandboxID and HeaderSandboxPort route an envd request through
	// a shared sandbox host.
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	// HeaderNextToken is the paging cursor of GET /v2/sandboxes.
	HeaderNextToken = "X-Next-Token"
	// HeaderKeepalive asks envd for keepalive events on a stream.
	HeaderKeepalive = "Keepalive-Ping-Interval"
	// HeaderConnectTimeout is the Connect deadline; for process Start envd
	// also uses it as the process's lifetime.
	HeaderConnectTimeout = "Connect-Timeout-Ms"
	// HeaderDefaultUser, on a create, names the default user of the
	// sandbox: an extension of this project's emulator (E2B ignores it),
	// whose sandboxes otherwise default to E2B's "user".
	HeaderDefaultUser = "E2b-Emulator-Default-User"
)

// EnvdPort is the port envd listens on inside every sandbox.
const EnvdPort = 49983

// ClientID is the constant, deprecated clientID the API still returns.
const ClientID = "6532622b"

// NewSandbox is the body of POST /sandboxes.
type NewSandbox struct {
	TemplateID string `json:"templateID"`
	// Timeout is the sandbox lifetime in seconds.
	Timeout  int               `json:"timeout,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	EnvVars  map[string]string `json:"envVars,omitempty"`
	Secure   *bool             `json:"secure,omitempty"`
	// AllowInternetAccess is spelled in snake case on the wire.
	AllowInternetAccess *bool `json:"allow_internet_access,omitempty"`
	AutoPause           *bool `json:"autoPause,omitempty"`
}

// SandboxMetric is one sample of GET /sandboxes/{id}/metrics: CPU in
// percent of CPUCount CPUs, memory and disk in bytes.
type SandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// Sandbox is the reply of create and connect.
type Sandbox struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	Alias              string  `json:"alias,omitempty"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// SandboxDetail is the reply of GET /sandboxes/{id} and, without the
// token and domain, one element of the list.
type SandboxDetail struct {
	TemplateID          string            `json:"templateID"`
	Alias               string            `json:"alias,omitempty"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	State               string            `json:"state"`
	EnvdVersion         string            `json:"envdVersion"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	Domain              *string           `json:"domain,omitempty"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
}

// Sandbox states.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// TimeoutRequest is the body of POST /sandboxes/{id}/timeout and of
// /connect: seconds from now.
type TimeoutRequest struct {
	Timeout int `json:"timeout"`
}

// APIError is the error body of the control plane and of envd's plain
// HTTP endpoints.
type APIError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}
