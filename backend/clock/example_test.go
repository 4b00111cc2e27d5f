package clock_test

import (
	"fmt"
	"time"

	"github.com/baton-go/baton/backend/clock"
)

// A fake clock fires a timer only when the test moves it past the
// timer's instant.
func ExampleFake() {
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fired := make(chan time.Time, 1)
	c.AfterFunc(30*time.Second, func() { fired <- c.Now() })

	c.Advance(10 * time.Second)
	fmt.Println("after 10s:", len(fired))
	c.Advance(20 * time.Second)
	fmt.Println("after 30s:", (<-fired).Format(time.TimeOnly))
	// Output:
	// after 10s: 0
	// after 30s: 00:00:30
}
