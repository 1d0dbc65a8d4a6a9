package codec

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/errs"
)

// Key is a payload key: its id (KeyID of Key, written in every payload it
// encrypts) and the tenant whose payloads it encrypts ("" for the control
// plane's own, and for the one key every site held before keys were per
// tenant).
type Key struct {
	ID     string
	Tenant string
	Key    []byte
}

// Source finds keys a Keyring was not given: the control plane's store.
type Source interface {
	// CurrentKey is the key that encrypts tenant's payloads now.
	CurrentKey(ctx context.Context, tenant string) (Key, error)
	// KeyByID is any key, old or new.
	KeyByID(ctx context.Context, id string) (Key, error)
}

// currentTTL is how long a keyring keeps encrypting a tenant's payloads
// with the key it learnt before asking its Source again: a rotation
// elsewhere takes effect within it, and the old key still decrypts.
const currentTTL = time.Minute

// sourceTimeout bounds one Source call from inside a payload conversion,
// which has no context of its own.
const sourceTimeout = 10 * time.Second

// Keyring holds payload keys by id, and which one encrypts each tenant's
// payloads. A site agent's holds its tenant's keys only (and the old shared
// key, if it had it), so it decrypts no other tenant's payloads; the
// control plane's holds every key, through its Source.
type Keyring struct {
	src     Source
	mu      sync.Mutex
	byID    map[string]ringKey
	current map[string]current
}

type ringKey struct {
	tenant string
	aead   cipher.AEAD
}

type current struct {
	id     string
	learnt time.Time
	static bool // given, not learnt from the Source: never stale
}

// NewKeyring returns a keyring of keys; for each tenant the last key given
// encrypts. src, when not nil, is asked for what the keys do not say.
func NewKeyring(src Source, keys ...Key) (*Keyring, error) {
	r := &Keyring{src: src, byID: map[string]ringKey{}, current: map[string]current{}}
	for _, k := range keys {
		if err := r.add(k, src == nil); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// add holds k; encrypts makes it its tenant's current key. A key learnt
// from a Source is current only for currentTTL.
func (r *Keyring) add(k Key, encrypts bool) error {
	if len(k.Key) != KeySize {
		return errs.Invalid("key", "a payload key must be %d bytes, got %d", KeySize, len(k.Key))
	}
	if k.ID != KeyID(k.Key) {
		return errs.New(errs.InvalidInput, "payload key %s does not match its id", k.ID)
	}
	block, err := aes.NewCipher(k.Key)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot create AES cipher")
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot create GCM")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[k.ID] = ringKey{tenant: k.Tenant, aead: aead}
	if encrypts {
		r.current[k.Tenant] = current{id: k.ID, learnt: time.Now(), static: r.src == nil}
	}
	return nil
}

// encryptKey returns the id and cipher that encrypt tenant's payloads.
func (r *Keyring) encryptKey(tenant string) (string, cipher.AEAD, error) {
	r.mu.Lock()
	c, ok := r.current[tenant]
	fresh := ok && (c.static || time.Since(c.learnt) < currentTTL)
	k := r.byID[c.id]
	r.mu.Unlock()
	if fresh {
		return c.id, k.aead, nil
	}
	if r.src == nil {
		return "", nil, errs.New(errs.InvalidState, "this process holds no payload key of tenant %q", tenant)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sourceTimeout)
	defer cancel()
	nk, err := r.src.CurrentKey(ctx, tenant)
	if err != nil {
		if ok { // the last one known still encrypts safely: it still decrypts
			return c.id, k.aead, nil
		}
		return "", nil, err
	}
	if err := r.add(nk, true); err != nil {
		return "", nil, err
	}
	return r.encryptKey(tenant)
}

// decryptKey returns the cipher of key id, asking the Source once for a key
// it does not hold (one made by a rotation elsewhere).
func (r *Keyring) decryptKey(id string) (cipher.AEAD, error) {
	r.mu.Lock()
	k, ok := r.byID[id]
	r.mu.Unlock()
	if ok {
		return k.aead, nil
	}
	if r.src != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sourceTimeout)
		defer cancel()
		nk, err := r.src.KeyByID(ctx, id)
		if err == nil && nk.ID == id {
			if err := r.add(nk, false); err != nil {
				return nil, err
			}
			return r.decryptKey(id)
		}
	}
	return nil, errs.New(errs.InvalidInput,
		"payload was encrypted with key %q, which this process does not hold: it is another tenant's, or the key file or join is not the one that wrote the history", id)
}

// PayloadTenant is the codec endpoint's PayloadTenant: the tenant of the
// key that encrypted p, a key made after this ring was (a new tenant's, a
// rotation's) learnt from the Source; "" for the control plane's own key
// and for a key no one holds.
func (r *Keyring) PayloadTenant(p *commonpb.Payload) string {
	id := string(p.GetMetadata()[MetadataKeyID])
	if _, err := r.decryptKey(id); err != nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id].tenant
}

// Codec returns the payload codec that encrypts with tenant's key and
// decrypts with any key of the ring.
func (r *Keyring) Codec(tenant string) *Codec { return &Codec{ring: r, tenant: tenant} }

// DataConverter returns Temporal's default data converter with payloads
// encrypted by the ring: inside a workflow with the key of the tenant its
// TenantId search attribute names, in a client call with the tenant of
// WithTenant, else with fallback's key.
func (r *Keyring) DataConverter(fallback string) converter.DataConverter {
	return tenantConverter{DataConverter: converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), r.Codec(fallback)),
		ring: r, tenant: fallback}
}

// TenantAttribute is the search attribute naming a workflow's tenant.
var TenantAttribute = temporal.NewSearchAttributeKeyKeyword("TenantId")

// tenantConverter is a converter that picks its tenant's key from where it
// converts (workflow.ContextAware). It embeds the interface, so none of the
// inner converter's other methods (serialization context) bypass it.
type tenantConverter struct {
	converter.DataConverter
	ring   *Keyring
	tenant string
}

var _ workflow.ContextAware = tenantConverter{}

func (c tenantConverter) forTenant(t string) converter.DataConverter {
	if t == "" || t == c.tenant {
		return c
	}
	return c.ring.DataConverter(t)
}

// WithWorkflowContext encrypts with the key of the workflow's tenant: the
// activity inputs it sends a site are then readable by that tenant's sites
// only.
func (c tenantConverter) WithWorkflowContext(ctx workflow.Context) converter.DataConverter {
	return c.forTenant(workflowTenant(ctx))
}

// workflowTenant is the workflow's TenantId search attribute, decoded from
// its one payload ("" when it has none). workflow.GetTypedSearchAttributes
// decodes every attribute the workflow has, and the SDK asks for a
// converter for each payload it converts: that was 0.5% of a fleet loop's
// CPU at 200 machines.
func workflowTenant(ctx workflow.Context) string {
	p := workflow.GetInfo(ctx).SearchAttributes.GetIndexedFields()[TenantAttribute.GetName()]
	var t string
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &t) != nil {
		return ""
	}
	return t
}

// WithContext encrypts with the key of the tenant WithTenant put in ctx.
func (c tenantConverter) WithContext(ctx context.Context) converter.DataConverter {
	t, _ := ctx.Value(tenantKey{}).(string)
	return c.forTenant(t)
}

type tenantKey struct{}

// WithTenant marks ctx as tenant's: a workflow started or signalled with it
// gets its payloads encrypted with tenant's key.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}
