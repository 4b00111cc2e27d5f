package redisbackend

import "strings"

// hashSlot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its
// hash tag — the part between the first "{" and the next "}" when that is
// non-empty — or of the whole key, modulo 16384.
// hashTag returns key's hash tag, the part between the first "{" and the
// next "}", and whether it has one (a non-empty part).
func hashTag(key string) (string, bool) {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j], true
		}
	}
	return "", false
}

func hashSlot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
