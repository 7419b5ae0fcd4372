// offtrace-xpti C++ shim: the parts of the XPTI 2026.2 ABI that are C++ by nature.
//
// * The metadata map of every event is a genuine libstdc++ std::unordered_map<uint32_t,int32_t>
//   embedded at offset 56 of trace_event_data_t; subscribers manipulate it with inline libstdc++
//   code, so the only safe way to build it is to let libstdc++ build it.
// * The four C++ interfaces (xpti_payload_t, xpti_trace_event_t, xpti_metadata_t,
//   xpti_tracepoint_t) are declared here exactly as in xpti_trace_framework.h (same virtual
//   functions in the same order), so g++ emits Itanium vtables with the documented slot orders.
//
// A tracepoint instance is two 128-byte cells that Rust owns (never returned to the OS): its
// trace_event_data_t in the event region and, at a fixed distance (ot_shim_set_side_offset), a
// `Side` object in the side region holding the four interface subobjects, the instance's own
// payload_t copy and the metadata iterator. Rust writes the Side's vtable pointers and payload
// before it hands out an interface pointer (instance.rs), so a Side reachable from C++ always
// holds the instance's exact payload, and its methods find the event by adding the fixed offset
// to `this`. Nothing here takes a lock; the Rust side serialises what needs serialising.

#include <cstddef>
#include <cstdint>
#include <new>
#include <unordered_map>

namespace xpti {
using result_t = int32_t;
using object_id_t = int32_t;
using string_id_t = uint32_t;
enum class trace_activity_type_t { unknown_activity = 0, active = 1, overhead = 2, background = 4, sleep_activity = 8 };

struct uid_t { uint64_t p1, p2, p3; };

struct payload_t {
  const char *name;
  const char *stack_trace;
  const char *source_file;
  uint32_t line_no;
  uint32_t column_no;
  const void *code_ptr_va;
  uint64_t internal;
  uint64_t flags;
  uid_t uid;
};

struct reserved_data_t {
  payload_t *payload;
  std::unordered_map<uint32_t, int32_t> metadata;
};

struct trace_event_data_t {
  uint64_t unique_id;
  uint64_t data_id;
  uint64_t instance_id;
  uint16_t event_type;
  uint16_t activity_type;
  uint32_t unused;
  uint64_t source_id;
  uint64_t target_id;
  reserved_data_t reserved;
  void *global_user_data;
  uint64_t flags;
};
static_assert(sizeof(payload_t) == 80, "payload_t is 80 bytes");
static_assert(sizeof(trace_event_data_t) == 128, "trace_event_data_t is 128 bytes");
static_assert(offsetof(trace_event_data_t, reserved) + offsetof(reserved_data_t, metadata) == 56,
              "metadata map at offset 56");
static_assert(sizeof(std::unordered_map<uint32_t, int32_t>) == 56, "libstdc++ map image is 56 bytes");
}  // namespace xpti

constexpr int32_t kSuccess = 0;
constexpr int32_t kFalse = 1;
constexpr int32_t kDuplicate = (int32_t)0x80004003u;
constexpr int32_t kInvalidArg = (int32_t)0x80004006u;
constexpr uint64_t kNameAvailable = 0x1, kSourceFileAvailable = 0x2, kCodePointerAvailable = 0x4,
                   kLineInfoAvailable = 0x8;
constexpr uint64_t kEvUid = 0x1, kEvPayload = 0x20;

extern "C" {
struct xpti_payload_t {
  virtual ~xpti_payload_t() {}
  virtual const char *name() const = 0;
  virtual const char *source_file() const = 0;
  virtual uint32_t line_no() const = 0;
  virtual uint32_t column_no() const = 0;
  virtual uint64_t payload_flags() const = 0;
  virtual int32_t name_string_id() const = 0;
  virtual int32_t file_string_id() const = 0;
  virtual uint64_t uid64() const = 0;
  virtual bool is_valid() const = 0;
  virtual xpti::payload_t *payload_ref() = 0;
};
struct xpti_metadata_t {
  virtual ~xpti_metadata_t() {}
  virtual xpti::result_t first_item(char **key, xpti::object_id_t &value) = 0;
  virtual xpti::result_t next_item(char **key, xpti::object_id_t &value) = 0;
  virtual xpti::result_t add_item(const char *key, xpti::object_id_t value) = 0;
  virtual size_t count() = 0;
};
struct xpti_trace_event_t {
  virtual ~xpti_trace_event_t() {}
  virtual xpti_payload_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual uint16_t event_type() const = 0;
  virtual uint16_t activity_type() const = 0;
  virtual uint64_t source_uid64() const = 0;
  virtual uint64_t target_uid64() const = 0;
  virtual uint64_t event_flags() const = 0;
  virtual void set_activity_type(xpti::trace_activity_type_t type) = 0;
  virtual void set_event_type(uint16_t type) = 0;
  virtual xpti::payload_t *payload_ref() = 0;
  virtual xpti::trace_event_data_t *event_ref() = 0;
};
struct xpti_tracepoint_t {
  virtual ~xpti_tracepoint_t() {}
  virtual xpti_payload_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual xpti_trace_event_t *event() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual xpti::trace_event_data_t *event_ref() = 0;
  virtual xpti::payload_t *payload_ref() = 0;
};

// Callbacks into Rust, installed once by ot_shim_set_hooks before the first instance exists.
typedef const char *(*ot_lookup_string_fn)(uint32_t id);
typedef uint32_t (*ot_register_string_fn)(const char *s);
}

static ot_lookup_string_fn g_lookup_string = nullptr;
static ot_register_string_fn g_register_string = nullptr;
// Event address minus Side address (the same for every instance; set once before the first one).
static intptr_t g_side_to_event = 0;

namespace {
using MetadataMap = std::unordered_map<uint32_t, int32_t>;

// The first insert into an empty map, without the bucket array: libstdc++ allocates 13 buckets
// (plus the node) on a map's first insert, which is most of the cost of xptiAddMetadata on a
// fresh event. A map may equally hold its elements in its single inline bucket (bucket count 1,
// the state libstdc++ itself produces with a large max_load_factor); the next insert then grows
// it as usual (the inline bucket is never freed). MapImage/NodeImage are the libstdc++
// _Hashtable and _Hash_node images (GCC >= 5 ABI; std::hash<uint32_t> caches no hash code);
// ot_map_fast_first_enable checks the state it produces through libstdc++'s own code (find,
// iteration, operator[], erase, growth, destruction) before it is ever used on an event.
struct MapImage {
  void **buckets;
  size_t bucket_count;
  void *before_begin;
  size_t element_count;
  float max_load;
  size_t next_resize;
  void *single_bucket;
};
struct NodeImage {
  NodeImage *next;
  uint32_t key;
  int32_t value;
};
static_assert(sizeof(MapImage) == sizeof(MetadataMap), "map image size");
static_assert(sizeof(NodeImage) == sizeof(std::__detail::_Hash_node<std::pair<const uint32_t, int32_t>, false>),
              "node image size");
bool g_fast_first = false;

// Inserts (key, value) into `map` if it is a pristine empty map (on its inline bucket, default
// load factor); false, touching nothing, otherwise.
bool first_insert_fast(void *map, uint32_t key, int32_t value) {
  auto *m = static_cast<MapImage *>(map);
  if (m->element_count != 0 || m->before_begin != nullptr || m->bucket_count != 1 ||
      m->buckets != &m->single_bucket || m->max_load != 1.0f)
    return false;
  // The node comes from the global operator new, as std::allocator's would: libstdc++ (ours or
  // a subscriber's inline code) frees it with the matching operator delete.
  auto *n = static_cast<NodeImage *>(::operator new(sizeof(NodeImage)));
  n->next = nullptr;
  n->key = key;
  n->value = value;
  m->before_begin = n;
  m->single_bucket = &m->before_begin;  // a bucket points at the node before its first node
  m->element_count = 1;
  return true;
}

struct Side final : xpti_payload_t, xpti_trace_event_t, xpti_metadata_t, xpti_tracepoint_t {
  xpti::payload_t pl;  // the instance's exact payload (internal = uid64); Rust writes it
  MetadataMap::iterator iter;  // null (== end()) in a fresh or recycled cell
  uint64_t spare;

  Side() : iter(), spare(0) {}
  ~Side() override {}

  xpti::trace_event_data_t *ev() const {
    return reinterpret_cast<xpti::trace_event_data_t *>(reinterpret_cast<intptr_t>(this) + g_side_to_event);
  }

  // ---- xpti_payload_t
  const char *name() const override { return pl.name ? pl.name : "<unknown>"; }
  const char *source_file() const override { return pl.source_file ? pl.source_file : "<unknown-file>"; }
  uint32_t line_no() const override { return pl.line_no; }
  uint32_t column_no() const override { return pl.column_no; }
  uint64_t payload_flags() const override { return pl.flags; }
  // The key's function and file IDs, as stored in the payload's uid (docs/reference/xpti-abi.md 6.2).
  int32_t name_string_id() const override { return static_cast<int32_t>(static_cast<uint32_t>(pl.uid.p2)); }
  int32_t file_string_id() const override { return static_cast<int32_t>(static_cast<uint32_t>(pl.uid.p1 >> 32)); }
  uint64_t uid64() const override { return reinterpret_cast<uint64_t>(ev()); }
  bool is_valid() const override {
    bool has_name = (pl.flags & kNameAvailable) && pl.name;
    bool has_file = (pl.flags & kSourceFileAvailable) && pl.source_file;
    bool has_line = (pl.flags & kLineInfoAvailable) && pl.line_no != 0xFFFFFFFFu;
    bool has_code = (pl.flags & kCodePointerAvailable) && pl.code_ptr_va;
    return (has_file && has_line) || has_name || has_code;
  }
  xpti::payload_t *payload_ref() override { return &pl; }

  // ---- xpti_trace_event_t
  xpti_payload_t *payload() override { return static_cast<xpti_payload_t *>(this); }
  xpti_metadata_t *metadata() override { return static_cast<xpti_metadata_t *>(this); }
  uint64_t instance() const override { return ev()->instance_id; }
  uint16_t event_type() const override { return ev()->event_type; }
  uint16_t activity_type() const override { return ev()->activity_type; }
  uint64_t source_uid64() const override { return ev()->source_id; }
  uint64_t target_uid64() const override { return ev()->target_id; }
  uint64_t event_flags() const override { return ev()->flags; }
  void set_activity_type(xpti::trace_activity_type_t type) override { ev()->activity_type = (uint16_t)type; }
  void set_event_type(uint16_t type) override { ev()->event_type = type; }
  xpti::trace_event_data_t *event_ref() override { return ev(); }

  // ---- xpti_metadata_t
  xpti::result_t first_item(char **k, xpti::object_id_t &value) override {
    iter = ev()->reserved.metadata.begin();
    return item(k, value);
  }
  xpti::result_t next_item(char **k, xpti::object_id_t &value) override {
    if (iter == ev()->reserved.metadata.end()) return kFalse;
    ++iter;
    return item(k, value);
  }
  xpti::result_t add_item(const char *k, xpti::object_id_t value) override {
    if (!k || !g_register_string) return kInvalidArg;
    uint32_t id = g_register_string(k);
    if (id == 0xFFFFFFFFu) return kInvalidArg;
    if (g_fast_first && first_insert_fast(&ev()->reserved.metadata, id, value)) return kSuccess;
    auto r = ev()->reserved.metadata.insert_or_assign(id, value);
    return r.second ? kSuccess : kDuplicate;
  }
  size_t count() override { return ev()->reserved.metadata.size(); }

  // ---- xpti_tracepoint_t
  xpti_trace_event_t *event() override { return static_cast<xpti_trace_event_t *>(this); }

  xpti::result_t item(char **k, xpti::object_id_t &value) {
    if (iter == ev()->reserved.metadata.end()) return kFalse;
    if (k) *k = const_cast<char *>(g_lookup_string ? g_lookup_string(iter->first) : nullptr);
    value = iter->second;
    return kSuccess;
  }
};
static_assert(sizeof(Side) == 128, "a side cell is 128 bytes, like an event");
}  // namespace

extern "C" {
void ot_shim_set_hooks(ot_lookup_string_fn lookup, ot_register_string_fn reg) {
  g_lookup_string = lookup;
  g_register_string = reg;
}

void ot_shim_set_side_offset(intptr_t side_to_event) { g_side_to_event = side_to_event; }

size_t ot_side_size(void) { return sizeof(Side); }
size_t ot_side_align(void) { return alignof(Side); }

// Writes the byte offsets Rust relies on: [payload_iface, event_iface, metadata_iface,
// tracepoint_iface, payload_t, iter].
void ot_layout(size_t out[6]) {
  alignas(Side) static unsigned char buf[sizeof(Side)];
  Side *i = new (buf) Side();
  const char *base = reinterpret_cast<const char *>(i);
  out[0] = reinterpret_cast<const char *>(static_cast<xpti_payload_t *>(i)) - base;
  out[1] = reinterpret_cast<const char *>(static_cast<xpti_trace_event_t *>(i)) - base;
  out[2] = reinterpret_cast<const char *>(static_cast<xpti_metadata_t *>(i)) - base;
  out[3] = reinterpret_cast<const char *>(static_cast<xpti_tracepoint_t *>(i)) - base;
  out[4] = reinterpret_cast<const char *>(&i->pl) - base;
  out[5] = reinterpret_cast<const char *>(&i->iter) - base;
  i->~Side();
}

// Constructs a Side in `mem` (Rust copies its four vtable pointers into side cells). A Side owns
// nothing: it is never destroyed.
void ot_side_construct(void *mem) { new (mem) Side(); }

// map = the address of trace_event_data_t::reserved.metadata. Returns 1 when the key existed
// (the value is overwritten anyway, like Intel's dispatcher), 0 when inserted.
int ot_map_insert_or_assign(void *map, uint32_t key, int32_t value) {
  if (g_fast_first && first_insert_fast(map, key, value)) return 0;
  auto r = static_cast<MetadataMap *>(map)->insert_or_assign(key, value);
  return r.second ? 0 : 1;
}
size_t ot_map_size(const void *map) { return static_cast<const MetadataMap *>(map)->size(); }
int ot_map_find(const void *map, uint32_t key, int32_t *value) {
  auto *m = static_cast<const MetadataMap *>(map);
  auto it = m->find(key);
  if (it == m->end()) return 0;
  *value = it->second;
  return 1;
}
void ot_map_clear(void *map) { static_cast<MetadataMap *>(map)->clear(); }

// Checks first_insert_fast against libstdc++ on scratch maps and enables it if every check
// passes. Returns 1 when enabled.
int ot_map_fast_first_enable(void) {
  alignas(MetadataMap) unsigned char buf[sizeof(MetadataMap)];
  bool ok = true;
  {
    auto *m = new (buf) MetadataMap();
    ok = first_insert_fast(m, 7, 70);
    asm volatile("" ::: "memory");
    if (ok) {
      ok = m->size() == 1 && m->bucket_count() == 1 && m->count(7) == 1 && m->count(8) == 0;
      auto it = m->find(7);
      ok = ok && it != m->end() && it->second == 70;
      size_t n = 0;
      for (auto &kv : *m) ok = ok && ++n == 1 && kv.first == 7 && kv.second == 70;
      ok = ok && n == 1;
      (*m)[8] = 80;  // grows out of the inline bucket
      auto a = m->find(7), b = m->find(8);
      ok = ok && m->size() == 2 && m->bucket_count() > 1 && a != m->end() && a->second == 70 && b != m->end() &&
           b->second == 80;
      ok = ok && m->erase(7) == 1 && m->size() == 1 && m->count(7) == 0 && m->count(8) == 1;
    }
    m->~MetadataMap();
  }
  if (ok) {
    auto *m = new (buf) MetadataMap();
    ok = first_insert_fast(m, 1, 10);
    asm volatile("" ::: "memory");
    ok = ok && m->erase(1) == 1 && m->empty() && m->begin() == m->end();
    (*m)[2] = 20;
    auto it = m->find(2);
    ok = ok && m->size() == 1 && it != m->end() && it->second == 20;
    ok = ok && !m->insert_or_assign(2, 21).second && m->find(2)->second == 21;
    m->~MetadataMap();
  }
  if (ok) {
    auto *m = new (buf) MetadataMap();
    ok = first_insert_fast(m, 3, 30);
    asm volatile("" ::: "memory");
    ok = ok && !first_insert_fast(m, 4, 40);  // not empty any more
    m->clear();
    ok = ok && m->empty() && m->find(3) == m->end();
    m->~MetadataMap();
  }
  g_fast_first = ok;
  return ok ? 1 : 0;
}

// A map image in caller-provided 56 bytes: an event's metadata (destroyed when a used map's
// instance is deleted: frees nodes a subscriber's inline operator[] may have allocated) or a
// test's scratch map.
void ot_map_construct(void *mem) { new (mem) MetadataMap(); }
void ot_map_destroy(void *mem) { static_cast<MetadataMap *>(mem)->~MetadataMap(); }
}
