package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// Repeated keys. encoding/json keeps the last of two equal keys of an
// object, and matches a struct's fields whatever the case of the key, so
// {"dry_run":true,"Dry_Run":false} decodes as a real run while a person, a
// proxy or an audit log reading the body sees a dry run. Every request body
// is therefore refused, with 400, when one of its objects, at any depth,
// repeats a key; in an object decoded into a struct (the request's own
// fields), keys that differ only in case count as the same. Objects that
// are data rather than fields (overrides keyed by user ID, bucket values,
// OFREP context attributes) may hold keys that differ in case: "Alice" and
// "alice" are two users.

// RepeatedKey returns the first key of the JSON b (which json.Valid
// accepts) that repeats, once unescaped, an earlier key of the same object,
// at any depth. It allocates nothing for objects of up to manyKeys keys
// without escapes, and holds larger objects' keys in a map, so its work is
// linear in len(b).
func RepeatedKey(b []byte) (string, bool) {
	type object struct {
		start int                 // its first key in keys
		seen  map[string]struct{} // its keys once it has more than manyKeys
	}
	var objectsArr [8]object
	var keysArr [32][]byte
	objects, keys := objectsArr[:0], keysArr[:0]
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			objects = append(objects, object{start: len(keys)})
		case '}':
			keys = keys[:objects[len(objects)-1].start]
			objects = objects[:len(objects)-1]
		case '"':
			end := StringEnd(b, i)
			if j := SkipSpace(b, end); j < len(b) && b[j] == ':' {
				key := keyBytes(b[i:end])
				o := &objects[len(objects)-1]
				if o.seen != nil {
					if _, ok := o.seen[string(key)]; ok {
						return string(key), true
					}
					o.seen[string(key)] = struct{}{}
				} else {
					for _, k := range keys[o.start:] {
						if bytes.Equal(k, key) {
							return string(key), true
						}
					}
					if keys = append(keys, key); len(keys)-o.start > manyKeys {
						o.seen = make(map[string]struct{}, 2*manyKeys)
						for _, k := range keys[o.start:] {
							o.seen[string(k)] = struct{}{}
						}
						keys = keys[:o.start]
					}
				}
			}
			i = end - 1
		}
	}
	return "", false
}

// manyKeys is how many keys of one object RepeatedKey compares one by one.
const manyKeys = 16

// keyBytes returns the text of the raw JSON string key: its bytes, or its
// decoded value when it holds escapes or invalid UTF-8.
func keyBytes(raw []byte) []byte {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner
	}
	return []byte(String(raw))
}

// RepeatedField returns the keys of b, the JSON of a request body that
// decodes into a value of type t, that repeat: a key repeated in any object
// (first and again are then equal), or two keys of an object decoded into a
// struct that differ only in case, which encoding/json matches to the same
// field. b is valid JSON that decodes into t without error, so it nests at
// most as deep as encoding/json allows.
func RepeatedField(b []byte, t reflect.Type) (first, again string, ok bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	i := SkipSpace(b, 0)
	if i == len(b) {
		return "", "", false
	}
	v := b[i:ValueEnd(b, i)]
	switch {
	case v[0] == '{' && t.Kind() == reflect.Struct:
		fields := fieldsOf(t)
		var seenArr [16]string
		seen := seenArr[:0]
		for it := (MembersAt(v, 0)); it.Next(); {
			key := string(keyBytes(it.Key))
			for _, s := range seen {
				if strings.EqualFold(s, key) {
					return s, key, true
				}
			}
			seen = append(seen, key)
			if ft, ok := fields[strings.ToLower(key)]; ok {
				if first, again, ok := RepeatedField(it.Value, ft); ok {
					return first, again, true
				}
			}
		}
	case v[0] == '{' && t.Kind() == reflect.Map:
		if key, ok := repeatedKeyShallow(v); ok {
			return key, key, true
		}
		for it := (MembersAt(v, 0)); it.Next(); {
			if first, again, ok := RepeatedField(it.Value, t.Elem()); ok {
				return first, again, true
			}
		}
	case v[0] == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t != rawMessageType:
		for j := SkipSpace(v, 1); v[j] != ']'; {
			end := ValueEnd(v, j)
			if first, again, ok := RepeatedField(v[j:end], t.Elem()); ok {
				return first, again, true
			}
			if j = SkipSpace(v, end); v[j] == ',' {
				j = SkipSpace(v, j+1)
			}
		}
	case v[0] == '{' || v[0] == '[':
		// Data: json.RawMessage, any, or a type the value does not match
		// (which decoding would have refused).
		if key, ok := RepeatedKey(v); ok {
			return key, key, true
		}
	}
	return "", "", false
}

// repeatedKeyShallow is RepeatedKey for the keys of the object v alone.
func repeatedKeyShallow(v []byte) (string, bool) {
	seen := map[string]struct{}{}
	for it := (MembersAt(v, 0)); it.Next(); {
		key := string(keyBytes(it.Key))
		if _, ok := seen[key]; ok {
			return key, true
		}
		seen[key] = struct{}{}
	}
	return "", false
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// structFields caches fieldsOf: reflect.Type → map[string]reflect.Type.
var structFields sync.Map

// fieldsOf returns the types of the JSON fields of the struct type t, by
// their names in lower case, embedded structs' fields included, as
// encoding/json finds them.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := structFields.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					add(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, ok := m[strings.ToLower(name)]; !ok { // the shallower wins
				m[strings.ToLower(name)] = ft
			}
		}
	}
	add(t)
	structFields.Store(t, m)
	return m
}
