package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/netpool/netpool/allocator"
	"github.com/netpool/netpool/allocator/boltstore"
	"github.com/netpool/netpool/ipam"
)

// prefillBinary makes n attachments (prefix-i) through the plugin's own binary, workers at a
// time, as a node's runtime would have made them.
func prefillBinary(ctx context.Context, p plugin, prefix string, n, workers int) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if _, err := p.add(ctx, fmt.Sprintf("%s-%06d", prefix, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs // nil when the channel is empty
}

// prefillBatch is how many claims share one transaction when prefilling in-process.
const prefillBatch = 4096

// prefillStore claims, in-process, the k-th allowed address of the first range of the network
// config conf for every k that hold accepts, on the bbolt file the config names. It returns how
// many it claimed and how many addresses the range has.
func prefillStore(ctx context.Context, conf []byte, hold func(k int) bool) (int, int, error) {
	cfg, err := ipam.Load(conf, "", nil)
	if err != nil {
		return 0, 0, err
	}
	store, err := boltstore.Open(cfg.BboltPath, 10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	pool := allocator.Pools(cfg)[0]
	created := time.Now().UTC()
	held, k := 0, 0
	a, more := pool.Range.NextAllowed(pool.Range.Start)
	for more {
		err = store.Update(ctx, func(ctx context.Context, tx allocator.Txn) error {
			for n := 0; more && n < prefillBatch; n++ {
				if hold(k) {
					al := allocator.Allocation{
						Pool: pool.Key, Addr: a, Network: cfg.Name, Scope: pool.Scope, Created: created,
						Owner: allocator.Owner{ContainerID: fmt.Sprintf("prefill-%08d", k), IfName: "eth0"},
					}
					if err := tx.Claim(ctx, pool, &al); err != nil {
						return err
					}
					held++
				}
				k++
				a, more = pool.Range.NextAllowed(a.Next())
			}
			return nil
		})
		if err != nil {
			break
		}
	}
	if closeErr := store.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return 0, 0, fmt.Errorf("failed to prefill %s: %w", cfg.BboltPath, err)
	}
	return held, k, nil
}
