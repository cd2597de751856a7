package redistest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerStartKillRestart(t *testing.T) {
	s := Start(t)
	reply, err := s.Do("SET", "k", "v")
	require.NoError(t, err)
	assert.Equal(t, "+OK", reply)
	s.Kill()
	_, err = s.Do("PING")
	require.Error(t, err, "a killed server must not answer")
	s.Restart(t)
	reply, err = s.Do("EXISTS", "k")
	require.NoError(t, err)
	assert.Equal(t, ":0", reply, "a restarted server starts empty")
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	s.Pause()
	_, err := s.command(100*time.Millisecond, "PING")
	require.Error(t, err, "a paused server must not answer")
	s.Resume()
	reply, err := s.Do("PING")
	require.NoError(t, err)
	assert.Equal(t, "+PONG", reply)
}
