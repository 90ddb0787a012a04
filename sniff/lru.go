package sniff

// lru is a map with a fixed capacity that forgets its least recently used
// key to make room for a new one. Values live in one slice that grows up to
// the capacity and is then reused: a value evicted to make room is handed
// back to the caller for the new key, slices and all, so a table under a
// flood of new keys stops allocating once it is full.
//
// lru is not safe for concurrent use; its owner locks.
type lru[K comparable, V any] struct {
	index   map[K]int32
	nodes   []lruNode[K, V]
	free    []int32 // slots of removed keys, reused before evicting
	head    int32   // most recently used, or -1
	tail    int32   // least recently used, or -1
	max     int
	evicted uint64
}

type lruNode[K comparable, V any] struct {
	key        K
	val        V
	prev, next int32
}

// newLRU returns an empty lru holding at most max keys; max must be
// positive.
func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{index: make(map[K]int32), head: -1, tail: -1, max: max}
}

// get returns the value of k and marks k most recently used.
func (l *lru[K, V]) get(k K) (*V, bool) {
	i, ok := l.index[k]
	if !ok {
		return nil, false
	}
	l.unlink(i)
	l.pushFront(i)
	return &l.nodes[i].val, true
}

// peek returns the value of k without marking it used.
func (l *lru[K, V]) peek(k K) (*V, bool) {
	i, ok := l.index[k]
	if !ok {
		return nil, false
	}
	return &l.nodes[i].val, true
}

// add inserts k, which must not be present, as the most recently used key,
// evicting the least recently used one if the lru is full. It returns the
// slot for k's value: zero for a new slot, or the old contents of a reused
// one, which the caller resets (keeping what allocations it can).
func (l *lru[K, V]) add(k K) *V {
	var i int32
	switch {
	case len(l.free) > 0:
		i = l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
	case len(l.nodes) < l.max:
		l.nodes = append(l.nodes, lruNode[K, V]{})
		i = int32(len(l.nodes) - 1)
	default:
		i = l.tail
		l.unlink(i)
		delete(l.index, l.nodes[i].key)
		l.evicted++
	}
	l.nodes[i].key = k
	l.index[k] = i
	l.pushFront(i)
	return &l.nodes[i].val
}

// remove deletes k, if present. Its slot is kept for the next add.
func (l *lru[K, V]) remove(k K) {
	i, ok := l.index[k]
	if !ok {
		return
	}
	l.unlink(i)
	delete(l.index, k)
	var zero lruNode[K, V]
	l.nodes[i] = zero
	l.free = append(l.free, i)
}

// len returns the number of keys held.
func (l *lru[K, V]) len() int {
	return len(l.index)
}

// each calls f for every key, most recently used first.
func (l *lru[K, V]) each(f func(K, *V)) {
	for i := l.head; i >= 0; i = l.nodes[i].next {
		f(l.nodes[i].key, &l.nodes[i].val)
	}
}

func (l *lru[K, V]) unlink(i int32) {
	n := &l.nodes[i]
	if n.prev >= 0 {
		l.nodes[n.prev].next = n.next
	} else {
		l.head = n.next
	}
	if n.next >= 0 {
		l.nodes[n.next].prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.prev, n.next = -1, -1
}

func (l *lru[K, V]) pushFront(i int32) {
	n := &l.nodes[i]
	n.prev, n.next = -1, l.head
	if l.head >= 0 {
		l.nodes[l.head].prev = i
	}
	l.head = i
	if l.tail < 0 {
		l.tail = i
	}
}
