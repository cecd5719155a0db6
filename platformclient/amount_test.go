package platformclient

import (
	"encoding/json"
	"testing"
)

func TestYuanJSONAcceptsStringAndNumberLiterals(t *testing.T) {
	var v struct {
		A Yuan  `json:"a"`
		B Yuan  `json:"b"`
		C *Yuan `json:"c"`
		D Yuan  `json:"d"`
	}
	if err := json.Unmarshal([]byte(`{"a":"88.88","b":88.8,"c":null,"d":0.01}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 8888 || v.B != 8880 || v.C != nil || v.D != 1 {
		t.Fatalf("got %+v", v)
	}
	// A float64 detour would turn 0.29 into 28 fen (0.29*100 = 28.999999999999996).
	if err := json.Unmarshal([]byte(`{"a":0.29,"b":"1.15"}`), &v); err != nil || v.A != 29 || v.B != 115 {
		t.Fatalf("got %+v, %v", v, err)
	}
	for _, in := range []string{`{"a":1e2}`, `{"a":"1.234"}`, `{"a":-1}`, `{"a":true}`, `{"a":""}`, `{"a":{}}`} {
		if err := json.Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("%s: want an error", in)
		}
	}
	out, err := json.Marshal(Yuan(8880))
	if err != nil || string(out) != `"88.80"` {
		t.Fatalf("marshal = %s, %v", out, err)
	}
}
