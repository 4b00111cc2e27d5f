package consulbackend

import (
	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// DecodeLease decodes a lease key's value as the store reads it.
func DecodeLease(key string, value []byte) (l backend.Lease, kept bool, err error) {
	r, err := decodeRecord(key, &api.KVPair{Key: "baton/lease/" + key, Value: value})
	if err != nil {
		return backend.Lease{}, false, err
	}
	return r.lease(key), r.Kept, nil
}

// EncodeLease encodes a lease as the store writes it.
func EncodeLease(l backend.Lease, kept bool) []byte {
	return encodeRecord(record{Owner: l.Owner, Token: l.Token, TTLMillis: l.TTL.Milliseconds(), Kept: kept})
}

// ParseCounter reads a fencing counter's value.
func ParseCounter(value []byte) (uint64, error) {
	return parseCounter("k", &api.KVPair{Key: "baton/fence/k", Value: value})
}

// DecodeMember decodes a member entry of group g as Members reads it.
func DecodeMember(s *Store, group, name string, value []byte) ([]backend.Member, error) {
	return s.decodeMembers("members", group, api.KVPairs{{Key: s.MemberKey(group, name), Value: value, Session: "s"}})
}
