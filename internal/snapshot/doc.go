// Package snapshot saves the embedded limiter's records to a file and loads
// them back, so a restart of the sidecar loses no counter.
//
// Write copies every live record of a memory limiter's shards, in chunks so
// checks keep being answered meanwhile, into a temporary file beside the
// target, fsyncs it, renames it over the target and fsyncs the directory: a
// reader sees the old snapshot or the new one, never a mix. Load reads a
// snapshot into a limiter, dropping the records that expired meanwhile
// (algo.Expired at the time of the load). Saver writes periodically and once
// more when it is closed.
//
// # Format (version 3)
//
// All integers are big-endian or Go varints (encoding/binary).
//
//	header   "RLSNAP" | version uint16 (3) | base int64 (Unix ms when written)
//	record   uvarint shared | uvarint n | n bytes    id: the first shared bytes of
//	                                                 the previous record's id, then these
//	         uvarint scale<<3 | algo                 scale 1..MaxScale; 0 fixed, 1 sliding, 2 token,
//	                                                 3 log, 4 slices, 5 leaky (versions 1 and 2:
//	                                                 scale<<2 | algo, algo 0 to 3)
//	         varint count                            algo.Record.Count (token, leaky: limit<<32 |
//	                                                 fraction; slices: slice count<<32 | hits)
//	         varint created - base                   algo.Record.Created
//	         varint modified - created               algo.Record.Modified
//	         uvarint n | n bytes                     log only (version 2 on): its entries,
//	                                                 as algo.Log.AppendBinary writes them
//	end      uvarint 0 | uvarint 0                   an empty id ends the records
//	trailer  uvarint number of records | uint32 CRC-32C (Castagnoli) of every byte before it
//
// Nothing may follow the checksum. Ids are any bytes, up to
// memstore.MaxIDBytes. A file that is not exactly this (wrong magic or
// version, bad checksum, truncated, trailing bytes, a field out of range) is
// refused with an error that matches ErrCorrupt and names the file.
package snapshot
