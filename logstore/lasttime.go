package logstore

import "time"

// LastFrameTime returns the time of the newest frame, zero when none was
// written: a supervisor tells a busy process from a quiet one by it.
func (l *Log) LastFrameTime() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastTime == 0 {
		return time.Time{}
	}
	return time.Unix(0, l.lastTime)
}
