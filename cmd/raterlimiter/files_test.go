package main

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadFileAbandonsAReadThatHangs(t *testing.T) {
	var l fileLoads
	v, err := loadFile(&l, "quick", func() (int, error) { return 7, nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v)
	_, err = loadFile(&l, "bad", func() (int, error) { return 0, errors.New("bad file") })
	assert.EqualError(t, err, "bad file")

	// maxHungLoads loads that never return (until release) are abandoned
	// after fileTimeout, each with an error naming the file.
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range maxHungLoads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			_, err := loadFile(&l, "/mnt/stale/policies.yaml", func() (int, error) {
				<-release
				return 1, nil
			})
			assert.ErrorIs(t, err, errHung)
			assert.EqualError(t, err, "/mnt/stale/policies.yaml: not read within 5s (a hung network mount?), abandoned: the read hangs")
			assert.GreaterOrEqual(t, time.Since(t0), fileTimeout)
		}()
	}
	wg.Wait()

	// While they still hang, another load fails at once, without a try.
	called := false
	_, err = loadFile(&l, "/mnt/stale/policies.yaml", func() (int, error) { called = true; return 1, nil })
	assert.ErrorIs(t, err, errHung)
	assert.EqualError(t, err, "/mnt/stale/policies.yaml: not read: 4 earlier reads have hung for more than 5s and not returned: the read hangs")
	assert.False(t, called)

	// Once they return, loads are tried again.
	close(release)
	require.Eventually(t, func() bool { return l.hung.Load() == 0 }, 10*time.Second, 10*time.Millisecond)
	v, err = loadFile(&l, "quick", func() (int, error) { return 8, nil })
	require.NoError(t, err)
	assert.Equal(t, 8, v)
}
