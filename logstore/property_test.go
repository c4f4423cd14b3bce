package logstore

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/internal/racetest"
)

// TestProperties writes random output (text and binary, in random sizes, on
// random channels) into logs of random retention and checks everything read
// back, before and after Close.
func TestProperties(t *testing.T) {
	t.Parallel()
	runs := 300
	if testing.Short() || racetest.Enabled {
		runs = 60
	}
	for seed := range uint64(runs) {
		rng := rand.New(rand.NewPCG(seed, 0x10657))
		keep := KeepUntilCleanup
		if rng.IntN(8) == 0 {
			keep = KeepNone
		}
		budget := MinRetention + rng.IntN(4<<10)
		switch rng.IntN(3) {
		case 1:
			budget = MinRetention + rng.IntN(256<<10)
		case 2:
			budget = MinRetention + rng.IntN(2<<20)
		}
		l := New(Options{Retention: budget, Keep: keep})
		// A test's clock, which stands still: held bytes wait for the
		// next write, never for a timer that would add frames between two
		// reads, nor past holdMax, after which a write on another channel
		// puts them out as a frame of their own, inside their character
		// (the real clock did so under load, 50 ms between two writes).
		l.now = fixedClock()
		if keep == KeepNone {
			budget = min(budget, liveWindow)
		}
		var m model
		binary := rng.IntN(2) == 0
		// Each channel's output is cut into writes at random points, so
		// that writes end inside UTF-8 sequences.
		var sources [PTY + 1][]byte
		take := func(ch Channel, n int) []byte {
			for len(sources[ch]) < n {
				sources[ch] = append(sources[ch], randomBytes(rng, n, binary)...)
			}
			p := sources[ch][:n:n]
			sources[ch] = sources[ch][n:]
			return p
		}
		writes := rng.IntN(64)
		for i := range writes {
			n := rng.IntN(64)
			switch rng.IntN(6) {
			case 0:
				n = rng.IntN(4)
			case 1:
				n = rng.IntN(64 << 10)
			case 2:
				if rng.IntN(8) == 0 {
					n = rng.IntN(1 << 20)
				}
			}
			ch := Channel(1 + rng.IntN(3))
			m.write(l, ch, take(ch, n))
			if i%16 == 15 {
				require.NoError(t, checkLog(l, &m, budget, rng), "seed %d, %d writes, retention %d, %s", seed, i+1, budget, keep)
			}
		}
		require.NoError(t, checkLog(l, &m, budget, rng), "seed %d, open, retention %d, %s", seed, budget, keep)
		m.close(l)
		require.NoError(t, checkLog(l, &m, budget, rng), "seed %d, closed, retention %d, %s", seed, budget, keep)
	}
}

// FuzzLog drives a log from a script: each script byte is one write, its
// low two bits the channel (0: close the log) and the rest the length taken
// from data, scaled up for some writes; retention comes from the fuzzer.
func FuzzLog(f *testing.F) {
	f.Add([]byte{1, 5, 9, 2}, []byte("héllo wörld €😀 done\n"), uint32(0), false)
	f.Add([]byte{0x05, 0x05, 0x05, 0x05, 0x06}, []byte("\xf0\x9f\x98\x80\xf0\x9f\x98"), uint32(200), false)
	f.Add([]byte{0x05, 0x09, 0x05, 0x0a, 0x05}, []byte("\xf0\x9f\x98\x80\xe2\x82\xac"), uint32(0), true)
	f.Add([]byte{0x0d, 0x0e, 0x0f}, []byte("\xe2\x82\xac\xff\xfe\xed\xa0\x80\xc0\xaf"), uint32(130), false)
	f.Add([]byte{0xfd, 0xfe, 0x00, 0x09}, []byte("abcdefgh\xc3\xa9\xc3"), uint32(1000), false)
	f.Add([]byte{0x81, 0x42, 0xc3}, []byte("\x80\x80\x80\x80\x80\xc2"), uint32(64<<10), true)
	f.Fuzz(func(t *testing.T, script, data []byte, retention uint32, keepNone bool) {
		budget := max(MinRetention, int(retention%(1<<20)))
		opts := Options{Retention: budget}
		if keepNone {
			opts.Keep = KeepNone
			budget = min(budget, liveWindow)
		}
		l := New(opts)
		l.now = fixedClock() // as in TestProperties
		var m model
		for _, op := range script {
			ch := Channel(op & 3)
			if ch == 0 {
				m.close(l)
				continue
			}
			n := int(op >> 2)
			k := min(n, len(data))
			p := data[:k:k]
			data = data[k:]
			if n >= 48 {
				// A large write: what it took, repeated up to its size.
				n = (n - 47) * 4 << 10
				for len(p) < n && len(p) > 0 {
					p = append(p, p...)
				}
			}
			m.write(l, ch, p)
		}
		rng := rand.New(rand.NewPCG(uint64(len(script)), uint64(retention)))
		require.NoError(t, checkLog(l, &m, budget, rng))
		m.close(l)
		require.NoError(t, checkLog(l, &m, budget, rng))
	})
}
