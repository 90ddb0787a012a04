package announce

import "time"

// dueHeap is a container/heap of items ordered by when each is due, each
// knowing its place in the heap so that heap.Remove and heap.Fix find it:
// the scheduler's rounds and the engine's probes.
type dueHeap[T dueItem] []T

// dueItem is what a dueHeap holds.
type dueItem interface {
	dueTime() time.Time
	setHeapIndex(i int) // -1 once out of the heap
}

func (h dueHeap[T]) Len() int           { return len(h) }
func (h dueHeap[T]) Less(i, j int) bool { return h[i].dueTime().Before(h[j].dueTime()) }
func (h dueHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].setHeapIndex(i)
	h[j].setHeapIndex(j)
}

func (h *dueHeap[T]) Push(x any) {
	it := x.(T)
	it.setHeapIndex(len(*h))
	*h = append(*h, it)
}

func (h *dueHeap[T]) Pop() any {
	old := *h
	it := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	it.setHeapIndex(-1)
	*h = old[:len(old)-1]
	return it
}
