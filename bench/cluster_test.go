package bench

import (
	"strings"
	"testing"
	"time"
)

// RunCluster and RunReplicaAck, run briefly, make progress in every
// configuration, report the figures their tables print, and fill the
// ratios. Nothing about timing is asserted.
func TestRunClusterAndReplicaAck(t *testing.T) {
	cl, err := RunCluster(t.Context(), ClusterOptions{Duration: time.Second, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Workers != 6 || len(cl.Runs) != 2 || cl.Runs[0].Masters != 1 || cl.Runs[1].Masters != 3 {
		t.Fatalf("cluster results: %+v; want 6 workers (4 rounded up to a multiple of 3), runs of 1 and 3 masters", cl)
	}
	for _, r := range cl.Runs {
		if r.Cycles == 0 || r.OpsPerS <= 0 || len(r.ServerCPU) != r.Masters {
			t.Errorf("cluster of %d masters: %+v; want cycles and a CPU figure per master", r.Masters, r)
		}
	}
	if cl.Ratio <= 0 {
		t.Errorf("cluster ratio %v, want positive", cl.Ratio)
	}

	ack, err := RunReplicaAck(t.Context(), ReplicaAckOptions{Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(ack.Runs) != 2 || ack.Runs[0].Cycles == 0 || ack.Runs[1].Cycles == 0 || ack.Ratio <= 0 {
		t.Fatalf("replica ack results: %+v; want cycles with and without, and a ratio", ack)
	}

	var b strings.Builder
	if err := (&Results{Cluster: cl, ReplicaAck: ack}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 masters / 1 master:", "WithReplicaAck(1)", "with / without:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
