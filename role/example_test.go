package role_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
)

// Two instances of one service: the first to start becomes master; when it
// stops, it releases the role and the other takes over at once.
func ExampleElector() {
	store := membackend.New() // redisbackend.New(client) in production
	defer store.Close()
	quiet := role.WithLogger(slog.New(slog.DiscardHandler))

	idA, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	idB, _ := instanceid.New("10.0.0.8", "acme", "billing", 8080)
	type tenure struct {
		id    instanceid.ID
		epoch uint64 // from the store's clock: a large number that only increases
	}
	elected := make(chan tenure, 2)
	onElected := func(id instanceid.ID) role.Option {
		return role.OnElected(func(ctx context.Context) {
			epoch, _ := role.EpochFromContext(ctx)
			elected <- tenure{id, epoch}
		})
	}
	a, _ := role.NewElector(store, idA, role.Config{}, quiet, onElected(idA))
	b, _ := role.NewElector(store, idB, role.Config{}, quiet, onElected(idB))

	// Each instance runs its elector until its context ends.
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	doneA, doneB := make(chan error), make(chan error)
	go func() { doneA <- a.Run(ctxA) }()
	first := <-elected
	fmt.Println(first.id, "is master")
	go func() { doneB <- b.Run(ctxB) }()

	stopA() // a shuts down: it releases the role key at once
	<-doneA
	second := <-elected
	fmt.Println(second.id, "is master, with a larger epoch:", second.epoch > first.epoch)
	fmt.Println("a is master:", a.IsMaster(), "- b is master:", b.IsMaster())
	stopB()
	<-doneB
	// Output:
	// 10.0.0.7:acme:billing:8080 is master
	// 10.0.0.8:acme:billing:8080 is master, with a larger epoch: true
	// a is master: false - b is master: true
}

// Handlers that cannot be handed the elector use the package default.
func ExampleSetDefault() {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	el, _ := role.NewElector(store, id, role.Config{}, role.WithLogger(slog.New(slog.DiscardHandler)))
	role.SetDefault(el)
	defer role.SetDefault(nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { el.Run(ctx); close(done) }()
	for !role.IsMaster() {
		time.Sleep(time.Millisecond)
	}
	// Any instance, given its ID: the framework's isMaster(app, id).
	ok, _ := el.IsMasterOf(context.Background(), "billing", "10.0.0.7:acme:billing:8080")
	fmt.Println("master:", role.IsMaster(), "- IsMasterOf:", ok)
	cancel()
	<-done
	// Output:
	// master: true - IsMasterOf: true
}

// catalog is an Announcer that prints what it is told, as
// consulbackend.Service tells Consul's catalog.
type catalog struct {
	changes chan string
	last    string
}

func (c *catalog) Announce(_ context.Context, master bool) error {
	tag := "slave"
	if master {
		tag = "master"
	}
	if tag != c.last { // every heartbeat announces; print the changes
		c.last = tag
		c.changes <- "registered as " + tag
	}
	return nil
}

func (c *catalog) Withdraw(context.Context) error {
	c.changes <- "deregistered"
	return nil
}

// An elector announces itself and its role outside the store, for
// instance in Consul's catalog with consulbackend.Service, so that tools
// which read the catalog see who is master.
func ExampleWithAnnouncer() {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	c := &catalog{changes: make(chan string, 8)}
	el, _ := role.NewElector(store, id, role.Config{}, role.WithLogger(slog.New(slog.DiscardHandler)), role.WithAnnouncer(c))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- el.Run(ctx) }()
	// It may announce itself as a slave first, if it announces before
	// it is elected; then as master.
	for change := range c.changes {
		if change == "registered as master" {
			fmt.Println(change)
			break
		}
	}
	cancel()
	<-done
	// Stepping down, it may announce itself as a slave before it
	// withdraws; Run returns once it has withdrawn.
	for change := range c.changes {
		if change == "deregistered" {
			fmt.Println(change)
			break
		}
	}
	// Output:
	// registered as master
	// deregistered
}
