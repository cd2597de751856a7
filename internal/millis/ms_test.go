package millis_test

import (
	"testing"

	json "github.com/go-json-experiment/json/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// TestBucketJSON: a Bucket in the admin API's JSON names its algorithm
// ("algo":"sliding", never its number) and leaves slices out when 0, and
// reads back the same.
func TestBucketJSON(t *testing.T) {
	for _, tt := range []struct {
		b    millis.Bucket
		want string
	}{
		{millis.Bucket{Scale: 1000, Algo: check.AlgoName(rl.Sliding), Bucket: 5, Count: 2, Created: 10, Modified: 20},
			`{"scale":1000,"algo":"sliding","bucket":5,"count":2,"created":10,"modified":20}`},
		{millis.Bucket{Scale: 60000, Algo: check.AlgoName(rl.Slices), Bucket: 7, Slices: 6, Count: 1, Created: 10, Modified: 10},
			`{"scale":60000,"algo":"slices","bucket":7,"slices":6,"count":1,"created":10,"modified":10}`},
	} {
		b, err := json.Marshal([]millis.Bucket{tt.b})
		require.NoError(t, err)
		assert.Equal(t, "["+tt.want+"]", string(b))
		var back []millis.Bucket
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, []millis.Bucket{tt.b}, back)
	}
	_, err := json.Marshal(millis.Bucket{Scale: 1, Algo: 9})
	assert.Error(t, err, "an unknown algorithm has no name")
	var b millis.Bucket
	assert.Error(t, json.Unmarshal([]byte(`{"scale":1,"algo":2}`), &b), "the wire names the algorithm")
	assert.Error(t, json.Unmarshal([]byte(`{"scale":1,"algo":"bucket"}`), &b))
}
