package policy

import "net/netip"

// ClientIP lets the external tests reach the address Match keys KeyIP by.
func ClientIP(f *File, in *Input) netip.Addr { return f.clientIP(in) }
