package config_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/config"
)

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	valid := []struct {
		in   string
		want time.Duration
	}{
		// Go's form.
		{"0", 0},
		{"30s", 30 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"+5s", 5 * time.Second},
		{"2562047h47m16.854775807s", math.MaxInt64},
		// ISO-8601.
		{"PT30S", 30 * time.Second},
		{"PT1H30M", 90 * time.Minute},
		{"P1D", day},
		{"P2W", 14 * day},
		{"P1W2D", 9 * day},
		{"P1DT2H", day + 2*time.Hour},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT0,5S", 500 * time.Millisecond},
		{"PT1.5H", 90 * time.Minute},
		{"P0.5D", 12 * time.Hour},
		{"PT0S", 0},
		{"P0D", 0},
		{"pt30s", 30 * time.Second},
		{"Pt1h2m3s", time.Hour + 2*time.Minute + 3*time.Second},
		{"+PT10M", 10 * time.Minute},
		{"PT0.000000001S", time.Nanosecond},
		{"PT0.0000000019S", time.Nanosecond}, // truncated
		{"PT2562047H47M16.854775807S", math.MaxInt64},
		{"PT0000000000000000000000000030S", 30 * time.Second},
		{"P106751DT23H47M16.854775807S", math.MaxInt64},
	}
	for _, tt := range valid {
		got, err := config.ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}

	invalid := []struct{ in, reason string }{
		{"", "is empty"},
		{"-5s", "is negative"},
		{"-PT5S", "is negative"},
		{"-0s", "is negative"},
		{"30", "has no unit"},
		{"abc", "is not a duration"},
		{"5 s", "is not a duration"},
		{" 5s", "is not a duration"},
		{"2562047h47m16.854775808s", "is not a duration"},
		{"+", "is not a duration"},
		{"+-5s", "is not a duration"},
		{"P", "has nothing after P"},
		{"PT", "has T but no hours"},
		{"P1DT", "has T but no hours"},
		{"P1Y", "years, whose length varies"},
		{"P1M", "months, whose length varies"},
		{"P1Y2M", "years"},
		{"PT1H2D", "has D after T"},
		{"PT1W", "has W after T"},
		{"P1H", "has H before T"},
		{"P5S", "has S before T"},
		{"PT1S1M", "out of order"},
		{"PT1M1M", "repeated"},
		{"P1D1W", "out of order"},
		{"PT1HT1M", "has T twice"},
		{"PT1.5H30M", "only the last component may have a fraction"},
		{"P1.5DT1H", "only the last component may have a fraction"},
		{"PT.5S", "where a number belongs"},
		{"PT1.S", "decimal separator without digits"},
		{"PT30", "without a unit letter"},
		{"PT30X", "unknown unit 'X'"},
		{"PT30sx", "where a number belongs"},
		{"PT-5S", "where a number belongs"},
		{"PT1µS", "unknown unit 'µ'"},
		{"PT2562047H47M16.854775808S", "is too long"},
		{"P99999999999999999999D", "is too long"},
		{"P" + strings.Repeat("1", 200) + "D", "longer than 128 bytes"},
	}
	for _, tt := range invalid {
		got, err := config.ParseDuration(tt.in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v; want an error", tt.in, got)
			continue
		}
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("ParseDuration(%q): error %q does not wrap ErrInvalid", tt.in, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "config: duration ") || !strings.Contains(msg, tt.reason) {
			t.Errorf("ParseDuration(%q): error %q; want the config: prefix and %q", tt.in, msg, tt.reason)
		}
		if len(tt.in) <= 128 && !strings.Contains(msg, `"`+tt.in+`"`) {
			t.Errorf("ParseDuration(%q): error %q does not quote the input", tt.in, msg)
		}
	}
}

func TestDurationText(t *testing.T) {
	var v struct {
		AtMost  config.Duration `json:"lockAtMostFor"`
		AtLeast config.Duration `json:"lockAtLeastFor"`
	}
	if err := json.Unmarshal([]byte(`{"lockAtMostFor": "PT10M", "lockAtLeastFor": "30s"}`), &v); err != nil {
		t.Fatal(err)
	}
	if time.Duration(v.AtMost) != 10*time.Minute || time.Duration(v.AtLeast) != 30*time.Second {
		t.Errorf("got %v, %v", v.AtMost, v.AtLeast)
	}
	out, err := json.Marshal(v)
	if err != nil || string(out) != `{"lockAtMostFor":"10m0s","lockAtLeastFor":"30s"}` {
		t.Errorf("Marshal = %s, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"lockAtMostFor": "P1Y"}`), &v); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("P1Y: err = %v; want ErrInvalid", err)
	}
}

// Messages say the longest duration in years and days, not as Go's
// largest time.Duration.
func TestDurationLimitReadable(t *testing.T) {
	for _, in := range []string{"2562047h47m16.854775808s", "PT2562047H47M16.854775808S", "P99999999999999999999D"} {
		_, err := config.ParseDuration(in)
		if err == nil || strings.Contains(err.Error(), "at most 2562047h") || !strings.Contains(err.Error(), "about 292 years (106751 days)") {
			t.Errorf("ParseDuration(%q): %v; want the limit in years and days", in, err)
		}
	}
}
