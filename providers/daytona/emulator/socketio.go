package emulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	shared "github.com/agentbox/sandbox/providers/emulator"
)

// Engine.IO timing the emulator announces.
const (
	pingInterval = 25 * time.Second
	pingTimeout  = 20 * time.Second
)

// socketIO serves the events gateway the SDKs connect to at
// /api/socket.io/ (Engine.IO 4 over a websocket, Socket.IO 5 on top): the
// open packet, the namespace connect authenticated with the API key, and
// pings. It sends no events: the emulator answers every state change in
// the reply of the call that made it, so the SDKs never wait for one.
// Without this gateway a Node.js SDK keeps reconnecting and its process
// never exits.
func (s *Server) socketIO(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("transport") != "websocket" || r.Header.Get("Upgrade") == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 0, "message": "Transport unknown"})
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx := r.Context()
	sid := shared.RandomHex(10)
	open, _ := json.Marshal(map[string]any{
		"sid": sid, "upgrades": []string{}, "pingInterval": pingInterval.Milliseconds(),
		"pingTimeout": pingTimeout.Milliseconds(), "maxPayload": 1000000,
	})
	if err := conn.Write(ctx, websocket.MessageText, append([]byte("0"), open...)); err != nil {
		return
	}
	in := make(chan string)
	go func() {
		defer close(in)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			select {
			case in <- string(data):
			case <-ctx.Done():
				return
			}
		}
	}()
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		var reply string
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			_ = conn.Close(websocket.StatusGoingAway, "emulator closing")
			return
		case <-ping.C:
			reply = "2"
		case msg, ok := <-in:
			if !ok {
				return
			}
			reply = s.socketPacket(msg)
		}
		if reply == "" {
			continue
		}
		if err := conn.Write(ctx, websocket.MessageText, []byte(reply)); err != nil {
			return
		}
	}
}

// socketPacket answers one Engine.IO packet from a client ("" for none).
func (s *Server) socketPacket(msg string) string {
	switch {
	case msg == "2": // ping from the client (Engine.IO 3 habit)
		return "3"
	case strings.HasPrefix(msg, "40"): // Socket.IO connect to "/"
		var auth struct {
			Token string `json:"token"`
		}
		_ = json.Unmarshal([]byte(strings.TrimPrefix(msg, "40")), &auth)
		if !s.validKey(auth.Token) {
			return `44{"message":"Unauthorized"}`
		}
		b, _ := json.Marshal(map[string]string{"sid": shared.RandomHex(10)})
		return "40" + string(b)
	default: // pongs, events and acks need no answer
		return ""
	}
}
