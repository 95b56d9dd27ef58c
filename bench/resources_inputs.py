#!/usr/bin/env python3
"""resources_inputs.py OUT_DIR PEER_MODELS_DIR: the hostile inputs of issue 9,
section 3, written for bench/resources.sh (time and peak RSS by hand; the
ctest label `hostile` asserts exit codes and memory, never time).

  many_tensors.pt            150k names for one memoized tensor (LONG_BINGET)
  many_tensors.safetensors   100k one-element F32 tensors
  meta/model.safetensors     the peer GPTQ model with 90k __metadata__ entries
  stride0.pt                 a stride-0 F16 view of 2^25 - 64 elements (500 bytes)
  big_array.safetensors      a 10 MB header with an unknown key of [0,0,...]
  bigcfg/                    the peer GPTQ model with a 60 MB quantize_config.json
"""
import json
import os
import struct
import sys
import zlib

out = sys.argv[1]
peer = sys.argv[2]
os.makedirs(out, exist_ok=True)
def zipfile_bytes(entries):
    b = bytearray(); hs=[]
    for name, data in entries:
        n = name.encode(); hs.append(len(b)); crc = zlib.crc32(data)
        b += struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0, crc, len(data), len(data), len(n), 0) + n + data
    cd = len(b)
    for (name, data), h in zip(entries, hs):
        n = name.encode(); crc = zlib.crc32(data)
        b += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 0, 0, 0, crc, len(data), len(data), len(n), 0, 0, 0, 0, 0, h) + n
    cds = len(b) - cd
    b += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, len(entries), len(entries), cds, cd, 0)
    return bytes(b)
def sstr(s): s=s.encode(); return b'\x8c'+bytes([len(s)])+s
def glob(m,n): return b'c'+m.encode()+b'\n'+n.encode()+b'\n'
def i8(v): return b'\x8a\x08'+struct.pack('<q', v)
def pt(pkl, storages):
    es=[('archive/data.pkl', pkl)] + [('archive/data/'+k, d) for k,d in storages] + [('archive/version', b'3\n')]
    return zipfile_bytes(es)
def tensor(numel, size, stride, cls='FloatStorage'):
    return (glob('torch._utils','_rebuild_tensor_v2') + b'(' + b'(' + sstr('storage') + glob('torch',cls) + sstr('0') + sstr('cpu') + i8(numel) + b't' + b'Q'
            + i8(0) + b'(' + b''.join(i8(x) for x in size) + b't' + b'(' + b''.join(i8(x) for x in stride) + b't' + b'\x89' + glob('collections','OrderedDict') + b')R' + b'tR')
# 1. .pt with 150k names of one memoized tensor (hex keys; 'x' is not hex)
N=150000
p = bytearray(b'\x80\x02}(') + sstr('x') + tensor(1,[1],[1]) + b'r' + struct.pack('<I',0)
for i in range(1, N):  # SETITEMS batches of 1000, as pickle writes them
    if i % 1000 == 0: p += b'u('
    p += sstr('%x'%i) + b'j' + struct.pack('<I',0)
p += b'u.'
open(out+'/many_tensors.pt','wb').write(pt(bytes(p), [('0', struct.pack('<f',1.0))]))
# 2. safetensors with 100k tensors
def st(header, data):
    h = json.dumps(header, separators=(',',':')).encode(); h += b' '*((8-len(h)%8)%8)
    return struct.pack('<Q', len(h)) + h + data
hd = {}
for i in range(100000): hd['t%d'%i] = {'dtype':'F32','shape':[1],'data_offsets':[4*i,4*i+4]}
open(out+'/many_tensors.safetensors','wb').write(st(hd, b'\0'*400000))
# 3. GPTQ with 90k metadata entries
src=peer + '/gptq4-autogptq/model.safetensors'
raw=open(src,'rb').read(); n=struct.unpack('<Q',raw[:8])[0]; h=json.loads(raw[8:8+n]); data=raw[8+n:]
meta=h.get('__metadata__',{})
for i in range(90000): meta['m%d'%i]='v'
h['__metadata__']=meta
os.makedirs(out+'/meta', exist_ok=True)
open(out+'/meta/model.safetensors','wb').write(st(h, data))
open(out+'/meta/quantize_config.json','wb').write(open(peer + '/gptq4-autogptq/quantize_config.json','rb').read())
# 4. stride-0 view .pt of 500 bytes: F16 storage of 1 element, size [2^25 - 64], stride [0]
numel = (1<<26)//2 - 64
p = b'\x80\x02}' + sstr('v') + tensor(1,[numel],[0],'HalfStorage') + b's.'
open(out+'/stride0.pt','wb').write(pt(p, [('0', struct.pack('<e',1.0))]))
# 5. 10 MB header with a [0,0,...] array
arr = '[' + ','.join(['0']*(5*1024*1024)) + ']'
hs = '{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"junk":%s}}' % arr
hb = hs.encode(); hb += b' '*((8-len(hb)%8)%8)
open(out+'/big_array.safetensors','wb').write(struct.pack('<Q',len(hb))+hb+b'\0'*4)
# 6. 60 MB config
os.makedirs(out+'/bigcfg', exist_ok=True)
open(out+'/bigcfg/model.safetensors','wb').write(raw)
cfg=json.load(open(peer + '/gptq4-autogptq/quantize_config.json'))
s=json.dumps(cfg)[:-1] + ',"junk":[' + ','.join(['0']*(30*1024*1024)) + ']}'
open(out+'/bigcfg/quantize_config.json','w').write(s)
