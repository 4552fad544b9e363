package ipam

import "testing"

func TestOrdinalName(t *testing.T) {
	for _, tt := range []struct {
		name    string
		set     string
		ordinal int32
		ok      bool
	}{
		{"db-0", "db", 0, true},
		{"db-12", "db", 12, true},
		{"my-db-3", "my-db", 3, true},
		{"db-2147483647", "db", 2147483647, true},
		{"db-2147483648", "", 0, false},
		{"db-01", "", 0, false},
		{"db--1", "", 0, false},
		{"db-", "", 0, false},
		{"-1", "", 0, false},
		{"db", "", 0, false},
		{"db-x1", "", 0, false},
		{"web-7d4b9c-x2k4p", "", 0, false},
		{"", "", 0, false},
	} {
		set, ordinal, ok := OrdinalName(tt.name)
		if set != tt.set || ordinal != tt.ordinal || ok != tt.ok {
			t.Errorf("OrdinalName(%q) = %q, %d, %v; want %q, %d, %v", tt.name, set, ordinal, ok, tt.set, tt.ordinal, tt.ok)
		}
	}
}

func FuzzOrdinalName(f *testing.F) {
	for _, s := range []string{"db-0", "db-01", "a-b-2147483648", "-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		set, ordinal, ok := OrdinalName(name)
		if ok && (ordinal < 0 || set == "" || set+"-"+itoa(ordinal) != name) {
			t.Fatalf("OrdinalName(%q) = %q, %d: does not rebuild the name", name, set, ordinal)
		}
	})
}

func itoa(n int32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
