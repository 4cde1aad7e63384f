package hitratio

import "container/list"

// Cache is a policy under test: Access requests key, inserting it on a
// miss (evicting as the policy says), and reports whether it was a hit.
type Cache interface {
	Access(key uint64) bool
	Len() int
}

// LRU is an exact least-recently-used cache.
type LRU struct {
	cap   int
	order *list.List // front: most recent
	at    map[uint64]*list.Element
}

func NewLRU(capacity int) *LRU {
	return &LRU{cap: capacity, order: list.New(), at: make(map[uint64]*list.Element, capacity)}
}

func (c *LRU) Access(k uint64) bool {
	if e, ok := c.at[k]; ok {
		c.order.MoveToFront(e)
		return true
	}
	if c.order.Len() >= c.cap {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.at, old.Value.(uint64))
	}
	c.at[k] = c.order.PushFront(k)
	return false
}

func (c *LRU) Len() int { return c.order.Len() }

// Clock is CLOCK: entries in a ring of slots with a visited bit each; a
// hit sets the bit, and the hand clears set bits until it finds a clear
// one to evict. In a map file: one bit per slot, one hand per segment.
type Clock struct {
	keys    []uint64
	visited []bool
	used    int
	hand    int
	at      map[uint64]int
}

func NewClock(capacity int) *Clock {
	return &Clock{keys: make([]uint64, capacity), visited: make([]bool, capacity), at: make(map[uint64]int, capacity)}
}

func (c *Clock) Access(k uint64) bool {
	if i, ok := c.at[k]; ok {
		c.visited[i] = true
		return true
	}
	var i int
	if c.used < len(c.keys) {
		i = c.used
		c.used++
	} else {
		for c.visited[c.hand] {
			c.visited[c.hand] = false
			c.hand = (c.hand + 1) % len(c.keys)
		}
		i = c.hand
		delete(c.at, c.keys[i])
		c.hand = (c.hand + 1) % len(c.keys)
	}
	c.keys[i], c.visited[i] = k, false
	c.at[k] = i
	return false
}

func (c *Clock) Len() int { return len(c.at) }

// Sieve is SIEVE (Zhang et al., NSDI 2024): a FIFO queue with a visited
// bit per entry; new entries go to the head; the hand moves from the tail
// towards the head, clearing visited bits, and evicts the first entry
// whose bit is clear, which retained entries keep their places.
type Sieve struct {
	cap        int
	node       map[uint64]*sieveNode
	head, tail *sieveNode // head: newest
	hand       *sieveNode
}

type sieveNode struct {
	key        uint64
	visited    bool
	prev, next *sieveNode // prev: towards the head
}

func NewSieve(capacity int) *Sieve {
	return &Sieve{cap: capacity, node: make(map[uint64]*sieveNode, capacity)}
}

func (c *Sieve) Access(k uint64) bool {
	if n, ok := c.node[k]; ok {
		n.visited = true
		return true
	}
	if len(c.node) >= c.cap {
		c.evict()
	}
	n := &sieveNode{key: k, next: c.head}
	if c.head != nil {
		c.head.prev = n
	}
	c.head = n
	if c.tail == nil {
		c.tail = n
	}
	c.node[k] = n
	return false
}

func (c *Sieve) evict() {
	o := c.hand
	if o == nil {
		o = c.tail
	}
	for o.visited {
		o.visited = false
		if o = o.prev; o == nil {
			o = c.tail
		}
	}
	c.hand = o.prev
	if o.prev != nil {
		o.prev.next = o.next
	} else {
		c.head = o.next
	}
	if o.next != nil {
		o.next.prev = o.prev
	} else {
		c.tail = o.prev
	}
	delete(c.node, o.key)
}

func (c *Sieve) Len() int { return len(c.node) }

// S3FIFO is S3-FIFO (Yang et al., SOSP 2023): a small FIFO (10 % of the
// room) that new keys enter, a main FIFO, and a ghost FIFO of keys
// recently evicted from the small one; a 2-bit frequency per entry. A key
// leaving the small FIFO goes to the main one if it was hit more than
// once, else to the ghosts; a ghost that is requested again enters the
// main FIFO; the main FIFO reinserts an entry with a frequency above 0,
// less one, and evicts the others.
type S3FIFO struct {
	smallCap, mainCap int
	small, main       fifo
	ghost             fifo
	ghostSet          map[uint64]int // key -> times it is in the ghost FIFO
	freq              map[uint64]uint8
	inMain            map[uint64]bool
}

type fifo struct{ q []uint64 } // a queue of keys: push at the end, pop from the front

func (f *fifo) push(k uint64) { f.q = append(f.q, k) }
func (f *fifo) pop() uint64 {
	k := f.q[0]
	f.q = f.q[1:]
	if len(f.q) == 0 {
		f.q = f.q[:0:0]
	}
	return k
}
func (f *fifo) len() int { return len(f.q) }

func NewS3FIFO(capacity int) *S3FIFO {
	small := max(capacity/10, 1)
	return &S3FIFO{smallCap: small, mainCap: capacity - small,
		ghostSet: make(map[uint64]int), freq: make(map[uint64]uint8, capacity), inMain: make(map[uint64]bool, capacity)}
}

func (c *S3FIFO) Access(k uint64) bool {
	if f, ok := c.freq[k]; ok {
		c.freq[k] = min(f+1, 3)
		return true
	}
	for c.small.len()+c.main.len() >= c.smallCap+c.mainCap {
		c.evict()
	}
	c.freq[k] = 0
	if c.ghostSet[k] > 0 {
		c.main.push(k)
		c.inMain[k] = true
	} else {
		c.small.push(k)
	}
	return false
}

func (c *S3FIFO) evict() {
	if c.small.len() >= c.smallCap || c.main.len() == 0 {
		c.evictSmall()
	} else {
		c.evictMain()
	}
}

func (c *S3FIFO) evictSmall() {
	for c.small.len() > 0 {
		k := c.small.pop()
		if c.freq[k] > 1 {
			c.freq[k] = 0
			c.main.push(k)
			c.inMain[k] = true
			if c.main.len() > c.mainCap {
				c.evictMain()
			}
			continue
		}
		delete(c.freq, k)
		c.ghost.push(k)
		c.ghostSet[k]++
		for c.ghost.len() > c.mainCap {
			g := c.ghost.pop()
			if c.ghostSet[g]--; c.ghostSet[g] == 0 {
				delete(c.ghostSet, g)
			}
		}
		return
	}
}

func (c *S3FIFO) evictMain() {
	for c.main.len() > 0 {
		k := c.main.pop()
		if f := c.freq[k]; f > 0 {
			c.freq[k] = f - 1
			c.main.push(k)
			continue
		}
		delete(c.freq, k)
		delete(c.inMain, k)
		return
	}
}

func (c *S3FIFO) Len() int { return len(c.freq) }
