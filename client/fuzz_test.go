package client

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// FuzzAnswer feeds arbitrary statuses and bodies to the decoding of every
// call's answer: it never panics, succeeds only on a 200 (or a 429 from
// /check_rate), and every error is a *Error, or a FieldError (in an
// ItemError when the body names an index) that matches ErrInvalid.
func FuzzAnswer(f *testing.F) {
	f.Add(200, []byte(`{"allowed":true,"status":"ok","id":"u1","count":3,"limit":10,"remaining":7,"reset_ms":412,"retry_after_ms":0,"delay_ms":0}`))
	f.Add(429, []byte(`{"allowed":false,"status":"fail","count":11,"limit":10,"remaining":0,"reset_ms":412,"retry_after_ms":412,"delay_ms":0}`))
	f.Add(200, []byte(`[{"allowed":true,"count":1,"limit":2,"remaining":1,"reset_ms":5,"retry_after_ms":0,"delay_ms":0}]`))
	f.Add(200, []byte(`[{"scale":1000,"algo":"fixed","bucket":1,"count":2,"created":3,"modified":4}]`))
	f.Add(200, []byte(`{"deleted":2}`))
	f.Add(400, []byte(`{"error":"invalid scale","field":"scale","rule":"must be 1.."}`))
	f.Add(400, []byte(`{"error":"item 2","index":2,"field":"id","rule":"must not be empty"}`))
	f.Add(400, []byte(`{"error":"x","index":-1,"field":"","rule":""}`))
	f.Add(503, []byte(`{"error":"overloaded"}`))
	f.Add(500, []byte("plain text"))
	f.Add(200, []byte(`{"allowed":"yes"}`))
	f.Add(200, []byte(`{"algo":"bogus"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		var d rl.Decision
		var bs []millis.Bucket
		var n int
		decoders := map[string]func(int, []byte) error{
			"check_rate":  func(s int, b []byte) error { return decodeDecision(s, b, &d) },
			"check_rates": func(s int, b []byte) error { _, err := decodeDecisions(s, b, nil, 1); return err },
			"buckets":     func(s int, b []byte) error { return decodeBuckets(s, b, &bs) },
			"reset":       func(s int, b []byte) error { return decodeDeleted(s, b, &n) },
		}
		for name, decode := range decoders {
			err := answer(status, body, decode)
			if err == nil {
				ok := status == 200 || (status == 429 && name == "check_rate")
				assert.True(t, ok, "%s accepted a %d", name, status)
				continue
			}
			var ce *Error
			var fe *rl.FieldError
			switch {
			case errors.As(err, &ce):
				assert.Equal(t, status, ce.Status)
			case errors.As(err, &fe):
				require.Equal(t, 400, status)
				assert.NotEmpty(t, fe.Field)
				assert.ErrorIs(t, err, rl.ErrInvalid)
			default:
				t.Fatalf("%s: untyped error %T: %v", name, err, err)
			}
		}
	})
}
