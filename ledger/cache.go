package ledger

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"scv/reducer"
)

// DefaultCacheSize is how many projects a ledger keeps in memory unless
// Options.CacheSize says otherwise.
const DefaultCacheSize = 1000

// cache holds the committed state of the projects addressed most
// recently, at most size of them; the others are loaded again from their
// latest snapshot and the events after it when next addressed. Every
// project in it is immutable. A version replaces the one cached only if
// it is newer, so that a reader that loaded a project while the writer
// committed cannot put an older state back.
type cache struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[string, *reducer.Project]
	names map[string]string // name -> ID, for the projects cached

	hits, misses uint64
}

func newCache(size int) *cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	c := &cache{names: map[string]string{}}
	c.lru, _ = simplelru.NewLRU(size, func(id string, p *reducer.Project) {
		if c.names[p.Name] == id {
			delete(c.names, p.Name)
		}
	})
	return c
}

// get returns the cached project whose ID, else name, is ref.
func (c *cache) get(ref string) (*reducer.Project, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.lru.Get(ref)
	if !ok {
		if id, named := c.names[ref]; named {
			p, ok = c.lru.Get(id)
		}
	}
	if ok {
		c.hits++
	} else {
		c.misses++
	}
	return p, ok
}

// put caches p unless a newer version of it is cached.
func (c *cache) put(p *reducer.Project) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lru.Peek(p.ID); ok && old.LastSequence >= p.LastSequence {
		c.lru.Get(p.ID) // still, it was used
		return
	}
	c.lru.Add(p.ID, p)
	c.names[p.Name] = p.ID
}

// stats reports the cache's hits and misses so far and its length.
func (c *cache) stats() (hits, misses uint64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, c.lru.Len()
}
