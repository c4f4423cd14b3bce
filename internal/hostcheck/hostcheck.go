// Package hostcheck reads Host headers, for the checks that keep a web
// page from reaching a loopback daemon through DNS rebinding: its Host then
// names the attacker's domain, not this machine.
package hostcheck

import (
	"net/netip"
	"strconv"
	"strings"
)

// Loopback reports whether host, as Split returns it, is localhost or a
// loopback address.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Split returns the host of a Host header in the form the allowed hosts
// are kept in (see Canonical), and whether the header is well formed: a
// name or IPv4 literal, or an IPv6 literal in brackets, then an optional
// ":port" of up to five digits no greater than 65535.
func Split(hostport string) (string, bool) {
	host, port, hasPort := hostport, "", false
	if rest, ok := strings.CutPrefix(hostport, "["); ok {
		var after string
		if host, after, ok = strings.Cut(rest, "]"); !ok {
			return "", false
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", false
		}
		if after != "" {
			if port, hasPort = strings.CutPrefix(after, ":"); !hasPort {
				return "", false
			}
		}
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port, hasPort = hostport[:i], hostport[i+1:], true
		if strings.Contains(host, ":") {
			return "", false // an IPv6 literal must be in brackets
		}
	}
	if host == "" || (hasPort && !validPort(port)) {
		return "", false
	}
	return Canonical(host), true
}

// validPort reports whether p is a port number: digits, leading zeros
// allowed (a URL's port is any digits), no greater than 65535.
func validPort(p string) bool {
	if p == "" {
		return false
	}
	for _, c := range []byte(p) {
		if c < '0' || c > '9' {
			return false
		}
	}
	p = strings.TrimLeft(p, "0")
	n, err := strconv.Atoi(p)
	return p == "" || err == nil && len(p) <= 5 && n <= 65535
}

// Canonical is host in lower case, or an IP literal (without brackets)
// in its canonical form, so that each way of writing a host matches.
func Canonical(host string) string {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return ip.String()
	}
	return strings.ToLower(host)
}
