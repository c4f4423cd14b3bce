package inputwait

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// An event loop often wakes itself through a socketpair rather than a pipe
// (Python's asyncio does): a Unix socket whose peer the tree holds is fed by
// the tree, as a pipe it writes is. The kernel names a Unix socket's peer
// through sock_diag netlink, one socket at a time by inode.

const (
	unixDiagReqLen = 24  // struct unix_diag_req
	unixDiagMsgLen = 16  // struct unix_diag_msg
	udiagShowPeer  = 0x4 // UDIAG_SHOW_PEER
	unixDiagPeer   = 2   // UNIX_DIAG_PEER, an attribute holding the peer's inode
)

// unixPeers looks up the peers of Unix sockets over one netlink socket.
type unixPeers struct {
	opened bool
	fd     int // -1 when it could not be opened
	buf    []byte
	seq    uint32
}

func (u *unixPeers) close() {
	if u.opened && u.fd >= 0 {
		unix.Close(u.fd)
	}
}

// peer returns the inode of the peer of the Unix socket with inode ino, or
// 0 when it has none, is not a Unix socket of this network namespace, or
// the kernel does not say.
func (u *unixPeers) peer(ino uint64) uint64 {
	if !u.opened {
		u.opened = true
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			u.fd = -1
			return 0
		}
		u.fd, u.buf = fd, make([]byte, 4096)
	}
	if u.fd < 0 {
		return 0
	}
	u.seq++
	if unix.Sendto(u.fd, unixPeerRequest(ino, u.seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}) != nil {
		return 0
	}
	for {
		n, _, err := unix.Recvfrom(u.fd, u.buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n < unix.SizeofNlMsghdr {
			return 0
		}
		ne := binary.NativeEndian
		size := int(ne.Uint32(u.buf))
		if size < unix.SizeofNlMsghdr || size > n {
			return 0
		}
		if ne.Uint32(u.buf[8:]) != u.seq {
			continue // the answer to an earlier request that gave up
		}
		if ne.Uint16(u.buf[4:]) != unix.SOCK_DIAG_BY_FAMILY {
			return 0 // NLMSG_ERROR: no such socket
		}
		return peerAttr(u.buf[unix.SizeofNlMsghdr:size])
	}
}

// unixPeerRequest asks for the Unix socket ino and its peer.
func unixPeerRequest(ino uint64, seq uint32) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+unixDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], seq)
	r := b[unix.SizeofNlMsghdr:]
	r[0] = unix.AF_UNIX
	ne.PutUint32(r[4:], ^uint32(0)) // any state
	ne.PutUint32(r[8:], uint32(ino))
	ne.PutUint32(r[12:], udiagShowPeer)
	ne.PutUint64(r[16:], ^uint64(0)) // no cookie to check
	return b
}

// peerAttr finds the UNIX_DIAG_PEER attribute after a unix_diag_msg.
func peerAttr(msg []byte) uint64 {
	if len(msg) < unixDiagMsgLen {
		return 0
	}
	ne := binary.NativeEndian
	for a := msg[unixDiagMsgLen:]; len(a) >= 4; {
		l, typ := int(ne.Uint16(a)), ne.Uint16(a[2:])
		if l < 4 || l > len(a) {
			return 0
		}
		if typ == unixDiagPeer && l >= 8 {
			return uint64(ne.Uint32(a[4:]))
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return 0
}
