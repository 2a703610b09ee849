import json,statistics as st,time,sys,torch,torch.nn.functional as F
D,H,L,FF,S,V,MB=2048,16,24,8192,4096,131072,4
class CE(torch.autograd.Function):
 @staticmethod
 def forward(c,x,t):
  x=x.float();m=x.max(-1)[0];x.sub_(m[:,None]);pr=x.gather(-1,t[:,None])[:,0];torch.exp(x,out=x);s=x.sum(-1);x.div_(s[:,None]);c.save_for_backward(x,t);return torch.log(s)-pr
 @staticmethod
 def backward(c,g):
  x,t=c.saved_tensors;x.scatter_add_(-1,t[:,None],torch.full((t.numel(),1),-1.,device=x.device));x.mul_(g[:,None]);return x.bfloat16(),None
def run(nm,dr):
 dv='cuda';b=torch.bfloat16;torch.manual_seed(0)
 w=lambda *s:(torch.randn(*s,device=dv)*.02).to(b).requires_grad_()
 z=lambda *s,v=0.:torch.full(s,v,device=dv,dtype=b,requires_grad=True)
 p={'e':w(V,D),'o':w(V,D),'fw':z(D,v=1.),'fb':z(D)}
 for i in range(L):p.update({f'a{i}':z(D,v=1.),f'b{i}':z(D),f'q{i}':w(3*D,D),f'r{i}':z(3*D),f'p{i}':w(D,D),f'c{i}':z(D),f'd{i}':z(D,v=1.),f'f{i}':z(D),f'u{i}':w(FF,D),f'v{i}':z(FF),f'x{i}':w(D,FF),f'y{i}':z(D)})
 ns=list(p);ms=[p[n].detach().float().clone() for n in ns];gs=[torch.zeros_like(m) for m in ms];op=torch.optim.Adam(ms,lr=1e-4,fused=True)
 for m,g in zip(ms,gs):m.grad=g
 for n,g in zip(ns,gs):
  def hk(t,g=g):g.add_(t.grad.float());t.grad=None
  p[n].register_post_accumulate_grad_hook(hk)
 tk=[torch.randint(0,V,(S+1,),device=dv) for _ in range(MB)];ln=lambda x,a,c:F.layer_norm(x,(D,),p[a],p[c],1e-5)
 def lay(x,i):
  q,k,v=(t.view(1,S,H,D//H).transpose(1,2) for t in F.linear(ln(x,f'a{i}',f'b{i}'),p[f'q{i}'],p[f'r{i}']).split(D,-1))
  a=F.scaled_dot_product_attention(q,k,v,is_causal=True,dropout_p=dr)
  x=x+F.dropout(F.linear(a.transpose(1,2).reshape(S,D),p[f'p{i}'],p[f'c{i}']),dr)
  h=F.gelu(F.linear(ln(x,f'd{i}',f'f{i}'),p[f'u{i}'],p[f'v{i}']),approximate='tanh')
  return x+F.dropout(F.linear(h,p[f'x{i}'],p[f'y{i}']),dr)
 def step():
  for t in tk:
   x=F.dropout(p['e'][t[:S]],dr)
   for i in range(L):x=lay(x,i)
   (CE.apply(F.linear(ln(x,'fw','fb'),p['o']),t[1:]).mean()/MB).backward()
  with torch.no_grad():
   gn=torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gs]));torch._foreach_mul_(gs,torch.clamp(1/(gn+1e-6),max=1.))
   op.step()
   for n,m,g in zip(ns,ms,gs):p[n].copy_(m);g.zero_()
 for _ in range(2):step()
 torch.cuda.synchronize();T=[]
 for _ in range(6):
  t0=time.perf_counter();step();torch.cuda.synchronize();T.append(time.perf_counter()-t0)
 from torch.profiler import profile,ProfilerActivity as PA
 with profile(activities=[PA.CUDA]) as pf:step();torch.cuda.synchronize()
 ev=[e for e in pf.events() if e.device_type==torch.autograd.DeviceType.CUDA];per={};iv=sorted((e.time_range.start,e.time_range.end) for e in ev)
 for e in ev:c=per.setdefault(e.name[:120],[0.,0]);c[0]+=e.time_range.end-e.time_range.start;c[1]+=1
 bu=0;cs=ce=None
 for s_,e_ in iv:
  if ce is None or s_>ce:
   if ce is not None:bu+=ce-cs
   cs,ce=s_,e_
  else:ce=max(ce,e_)
 bu+=ce-cs
 return dict(name=nm,dropout=dr,hidden=D,heads=H,layers=L,ffn=FF,seq=S,vocab=V,micro_batches=MB,step_s_median=st.median(T),step_s_all=T,gpu_busy_us=bu,span_us=iv[-1][1]-iv[0][0],kernels_us=dict(sorted(per.items(),key=lambda kv:-kv[1][0])),torch=torch.__version__,cuda=torch.version.cuda,device=torch.cuda.get_device_name(),date_utc=time.strftime('%FT%TZ',time.gmtime()))
f=open(sys.argv[1],'w')
for nm,dr in(('gpt1.7b_dropout0.1',.1),('gpt1.7b_nodropout',0.)):
 r=run(nm,dr);f.write(json.dumps(r)+'\n');f.flush();print(nm,'step ms',round(r['step_s_median']*1e3,1),[round(t*1e3,1) for t in r['step_s_all']],'busy',round(r['gpu_busy_us']/1e3,1),'span',round(r['span_us']/1e3,1))
 for k,(u,n) in list(r['kernels_us'].items())[:22]:print(' %8.2f %5d %s'%(u/1e3,n,k[:90]))
 torch.cuda.empty_cache()
