package listenport

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Reading /proc/net/tcp walks every bucket of the kernel's table of
// connections, a few milliseconds on a host with a large table, to print
// the few listening sockets first. The sock_diag netlink interface (what
// ss uses) is asked for listening sockets only and reads the listening
// table alone, in microseconds. It answers for the network namespace of the
// asking socket, so it serves the processes in this process's namespace.

const (
	tcpListen      = 10                  // TCP_LISTEN
	nlmsgHdrLen    = unix.SizeofNlMsghdr // struct nlmsghdr
	diagReqLen     = 56                  // struct inet_diag_req_v2
	diagMsgInode   = 68                  // offset of idiag_inode in struct inet_diag_msg
	diagMsgSport   = 4                   // offset of id.idiag_sport, big-endian
	diagDumpFlags  = unix.NLM_F_REQUEST | unix.NLM_F_DUMP
	diagRecvBuffer = 32 << 10
)

// diagListeners returns the local port of every TCP socket, IPv4 and IPv6,
// that listens in this process's network namespace, by socket inode.
func diagListeners() (map[uint64]int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	ports := make(map[uint64]int)
	buf := make([]byte, diagRecvBuffer)
	for i, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := unix.Sendto(fd, diagRequest(family, uint32(i+1)), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		if err := readDump(fd, buf, ports); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

// diagRequest is a netlink message asking for a dump of the listening TCP
// sockets of family.
func diagRequest(family uint8, seq uint32) []byte {
	b := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], diagDumpFlags)
	ne.PutUint32(b[8:], seq)
	r := b[nlmsgHdrLen:]
	r[0] = family
	r[1] = unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 1<<tcpListen) // idiag_states; the socket id stays zero: any
	return b
}

// readDump reads the answers to one dump request until its end, adding the
// ports of the sockets they list.
func readDump(fd int, buf []byte, ports map[uint64]int) error {
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		for b := buf[:n]; len(b) >= nlmsgHdrLen; {
			size := int(binary.NativeEndian.Uint32(b))
			if size < nlmsgHdrLen || size > len(b) {
				return fmt.Errorf("sock_diag: bad message length %d", size)
			}
			typ, data := binary.NativeEndian.Uint16(b[4:]), b[nlmsgHdrLen:size]
			b = b[min((size+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1), len(b)):]
			switch typ {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(data) >= 4 {
					if errno := int32(binary.NativeEndian.Uint32(data)); errno != 0 {
						return fmt.Errorf("sock_diag: %w", unix.Errno(-errno))
					}
				}
				return nil
			}
			if len(data) < diagMsgInode+4 || data[1] != tcpListen {
				continue
			}
			port := binary.BigEndian.Uint16(data[diagMsgSport:])
			ports[uint64(binary.NativeEndian.Uint32(data[diagMsgInode:]))] = int(port)
		}
	}
}
