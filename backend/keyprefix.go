package backend

import "fmt"

// MaxKeyPrefixLen is the longest key prefix a store takes.
const MaxKeyPrefixLen = 128

// KeyPrefixChars says which characters a key prefix may hold, for messages.
const KeyPrefixChars = "letters, digits and - _ . : /"

// ValidateKeyPrefix reports whether prefix is usable as the first part of
// every key a store writes (redisbackend.WithPrefix,
// consulbackend.WithPrefix, config's redis.key-prefix and
// consul.key-prefix): 1 to MaxKeyPrefixLen bytes of ASCII letters, digits
// and - _ . : /. That leaves out the characters Redis reads as a pattern
// in SCAN MATCH and in ACL key patterns (* ? [ ] \ ^), which would make a
// store's key walk miss its own keys and ACLRules grant other prefixes;
// the braces of a hash tag ({tenant:app} must be the only one); and
// spaces and control characters. The error wraps ErrInvalidArgument and
// names the first character refused.
func ValidateKeyPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("%w: the key prefix is empty", ErrInvalidArgument)
	}
	if len(prefix) > MaxKeyPrefixLen {
		return fmt.Errorf("%w: the key prefix %.40q... is %d bytes, more than %d", ErrInvalidArgument, prefix, len(prefix), MaxKeyPrefixLen)
	}
	for _, r := range prefix {
		if !keyPrefixChar(r) {
			return fmt.Errorf("%w: the key prefix %q holds %q: use only %s (no glob characters, braces or spaces)",
				ErrInvalidArgument, prefix, r, KeyPrefixChars)
		}
	}
	return nil
}

// keyPrefixChar reports whether r may appear in a key prefix.
func keyPrefixChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	switch r {
	case '-', '_', '.', ':', '/':
		return true
	}
	return false
}
