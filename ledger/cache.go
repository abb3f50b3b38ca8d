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
// it is newer, and a version a reader loaded only if the writer committed
// nothing since the reader began (see putLoaded), so that no older state
// is ever put back.
type cache struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[string, *reducer.Project]
	names map[string]string // name -> ID, for the projects cached
	// commits counts the writer's commits cached so far.
	commits uint64

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

// committed caches the versions a commit made, the newest of each
// project, and counts the commit.
func (c *cache) committed(ps []*reducer.Project) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	for _, p := range ps {
		c.put(p)
	}
}

// generation is the number of commits cached so far: a reader takes it
// before it begins to read the database, and hands it to putLoaded.
func (c *cache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits
}

// putLoaded caches p, which a reader loaded after taking gen, unless the
// writer has committed since: p may then be older than a version the
// writer cached and the cache has evicted since, which is no longer there
// to keep p out.
func (c *cache) putLoaded(p *reducer.Project, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.commits == gen {
		c.put(p)
	}
}

// put caches p unless a newer version of it is cached. c.mu is held.
func (c *cache) put(p *reducer.Project) {
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
