package backend

import "testing"

func TestHideUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:pw@host:6379":         "redis://:<redacted>@host:6379",
		"redis://user:p@ss@host:6379/0": "redis://user:<redacted>@host:6379/0",
		"https://user:pw@consul:8501":   "https://user:<redacted>@consul:8501",
		"https://token@consul:8501":     "https://<redacted>@consul:8501",
		"user:pw@host:6379":             "user:<redacted>@host:6379",
		":pw@host:6379":                 ":<redacted>@host:6379",
		"host:6379":                     "host:6379",
		"https://consul:8501":           "https://consul:8501",
		"ops@example":                   "ops@example",
		"":                              "",
		"10.0.0.1:6379,user:pw@h:6379":  "10.0.0.1:<redacted>@h:6379",
		"redis://@host:6379":            "redis://@host:6379",
	} {
		if got := HideUserinfo(in); got != want {
			t.Errorf("HideUserinfo(%q) = %q; want %q", in, got, want)
		}
		if HasUserinfo(in) != (HideUserinfo(in) != in) {
			t.Errorf("HasUserinfo(%q) = %v, but Userinfo gives %q", in, HasUserinfo(in), HideUserinfo(in))
		}
	}
}
