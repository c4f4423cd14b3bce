package procfs

import (
	"bytes"
	"strconv"
)

// TasksOf counts the tasks (threads, a process's first one included) of
// the processes whose real uid is uid, as RLIMIT_NPROC counts them: every
// process of the machine's /proc is read once. Processes that end during
// the count are left out.
func TasksOf(uid int) (int, error) {
	names, err := ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := []byte(strconv.Itoa(uid))
	buf := make([]byte, 0, 4<<10)
	n := 0
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := ReadFile("/proc/"+name+"/status", buf[:0])
		if err != nil {
			continue
		}
		buf = b
		// Uid: real effective saved filesystem
		if ids := statusField(b, "Uid:"); len(ids) == 0 || !bytes.Equal(ids[0], want) {
			continue
		}
		if t := statusField(b, "Threads:"); len(t) == 1 {
			if k, err := strconv.Atoi(string(t[0])); err == nil {
				n += k
			}
		}
	}
	return n, nil
}

// statusField returns the words of the line of a /proc status file that
// begins with key, the key left out.
func statusField(b []byte, key string) [][]byte {
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			return bytes.Fields(rest)
		}
	}
	return nil
}
