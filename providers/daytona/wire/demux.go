package wire

import "io"

// Demuxer splits a session command's raw log into stdout and stderr by
// the markers that precede each stream's bytes. A frame may end inside a
// marker: up to two trailing bytes that may begin one are kept for the
// next Write. Bytes before the first marker belong to no stream and are
// dropped.
type Demuxer struct {
	Stdout, Stderr io.Writer
	cur            io.Writer
	pending        []byte
}

// Write demultiplexes b; it reports len(b) unless a stream's writer fails.
func (d *Demuxer) Write(b []byte) (int, error) {
	buf := append(d.pending, b...)
	d.pending = nil
	for len(buf) > 0 {
		i, m := nextMarker(buf)
		if i < 0 {
			keep := 0
			for k := 1; k <= 2 && k <= len(buf); k++ {
				if isMarkerPrefix(buf[len(buf)-k:]) {
					keep = k
				}
			}
			if err := d.emit(buf[:len(buf)-keep]); err != nil {
				return 0, err
			}
			d.pending = append([]byte(nil), buf[len(buf)-keep:]...)
			return len(b), nil
		}
		if err := d.emit(buf[:i]); err != nil {
			return 0, err
		}
		if m == StdoutMarker[0] {
			d.cur = d.Stdout
		} else {
			d.cur = d.Stderr
		}
		buf = buf[i+len(StdoutMarker):]
	}
	return len(b), nil
}

// Flush writes the bytes kept back at the end of the log.
func (d *Demuxer) Flush() error {
	err := d.emit(d.pending)
	d.pending = nil
	return err
}

func (d *Demuxer) emit(b []byte) error {
	if len(b) == 0 || d.cur == nil {
		return nil
	}
	_, err := d.cur.Write(b)
	return err
}

// nextMarker finds the first marker in b: its index and its byte.
func nextMarker(b []byte) (int, byte) {
	for i := 0; i+3 <= len(b); i++ {
		if c := b[i]; (c == 1 || c == 2) && b[i+1] == c && b[i+2] == c {
			return i, c
		}
	}
	return -1, 0
}

// isMarkerPrefix reports bytes that all equal 1 or all equal 2.
func isMarkerPrefix(b []byte) bool {
	for _, c := range b {
		if c != b[0] || (c != 1 && c != 2) {
			return false
		}
	}
	return len(b) > 0
}
