// Package logstore keeps the output of a process as frames with strictly
// increasing cursors, bounded in bytes, for paging and for live followers.
//
// Writers append bytes on a channel (stdout, stderr or pty); each write
// becomes one or more frames, in arrival order across channels, that never
// split a valid UTF-8 sequence: an incomplete sequence at the end of a write
// waits for the next write on its channel, or Close, or, once it has waited
// 50 ms, a write on another channel, which it then goes ahead of, cut. A frame whose bytes are
// not valid UTF-8 (binary output) says so through [Frame.IsText].
//
// Retention is bounded per log in output bytes ([Options.Retention]); the
// oldest frames are dropped whole to stay within it. A [Budget] bounds many
// logs together by the memory they take, their bytes and their frame
// tables, so that output in tiny frames counts for what it costs. Readers
// that ask for what is gone are told so ([Page.TruncatedHead], a [Warning]
// event) rather than handed a silent gap. Memory stays within about one and
// a half times the retention plus a small constant: small writes extend the newest frame
// while no reader has seen it or been handed its cursor, a log keeps at most one frame per
// [BytesPerFrame] bytes of retention, a follower that falls behind jumps
// ahead instead of buffering, and output flooding through a full log reuses
// the 64 KiB blocks that retention frees, rather than leaving garbage for
// the collector, unless a reader that may keep their bytes was handed a
// frame of them: a follower that is done with each frame as it delivers it
// ([Log.FollowLent]) only borrows them.
//
// One writer per channel appends while any number of readers page through
// what is retained or follow it live. Readers take the lock only to copy a
// bounded batch of frame headers; the bytes themselves are never modified
// while a reader may hold them, so a slow reader never holds the writer
// back.
package logstore
