package sniff

import (
	"slices"
	"testing"
)

func keys(l *lru[int, string]) []int {
	var ks []int
	l.each(func(k int, _ *string) { ks = append(ks, k) })
	return ks
}

func TestLRU(t *testing.T) {
	l := newLRU[int, string](3)
	for i := 1; i <= 3; i++ {
		*l.add(i) = "v"
	}
	if got := keys(l); !slices.Equal(got, []int{3, 2, 1}) {
		t.Fatalf("after adding 1, 2, 3: got %v, want most recent first [3 2 1]", got)
	}
	if _, ok := l.get(1); !ok {
		t.Fatal("get(1): missing")
	}
	if _, ok := l.peek(2); !ok {
		t.Fatal("peek(2): missing")
	}
	// get moved 1 to the front; peek left 2 where it was, so 2 goes.
	v := l.add(4)
	if *v != "v" {
		t.Errorf("add to a full lru: got slot %q, want the evicted value for reuse", *v)
	}
	if got := keys(l); !slices.Equal(got, []int{4, 1, 3}) || l.evicted != 1 {
		t.Fatalf("after adding 4: got %v with %d evicted, want [4 1 3] and 1", got, l.evicted)
	}
	l.remove(1)
	l.remove(1)
	l.remove(99)
	if got := keys(l); !slices.Equal(got, []int{4, 3}) || l.len() != 2 {
		t.Fatalf("after remove(1): got %v, len %d; want [4 3]", got, l.len())
	}
	// A removed key's slot is reused before anything is evicted.
	if v := l.add(5); *v != "" {
		t.Errorf("add after remove: got slot %q, want a zero one", *v)
	}
	if got := keys(l); !slices.Equal(got, []int{5, 4, 3}) || l.evicted != 1 || len(l.nodes) != 3 {
		t.Fatalf("after adding 5: got %v, %d evicted, %d slots; want [5 4 3], 1, 3", got, l.evicted, len(l.nodes))
	}
	for _, k := range []int{3, 4, 5} {
		l.remove(k)
	}
	if l.len() != 0 || l.head != -1 || l.tail != -1 {
		t.Fatalf("emptied: len %d head %d tail %d, want 0 -1 -1", l.len(), l.head, l.tail)
	}
	*l.add(6) = "six"
	if v, ok := l.get(6); !ok || *v != "six" || !slices.Equal(keys(l), []int{6}) {
		t.Fatalf("refilled: got %v %v %v", v, ok, keys(l))
	}
}
