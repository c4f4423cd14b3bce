// Package logstore keeps the output of a process as frames with strictly
// increasing cursors, bounded in bytes, for paging and for live followers.
//
// One writer appends while any number of readers page through what is
// retained or follow it live. When retention drops the head, readers that ask
// for what is gone are told so (Page.TruncatedHead, a Warning event) rather
// than handed a silent gap.
package logstore
