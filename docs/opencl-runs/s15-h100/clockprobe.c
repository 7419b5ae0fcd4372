// clockprobe PLATFORM [ooo] [threads]: a device's profiling timestamps against CLOCK_MONOTONIC and
// CLOCK_REALTIME, each kernel bracketed by both clocks; CSV on stdout-file, summary on stderr.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include <unistd.h>
static long long ns(clockid_t c){struct timespec t;clock_gettime(c,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
static const char*src="__kernel void inc(__global int*a){a[get_global_id(0)]+=1;}";
int main(int argc,char**argv){
  const char*want=argc>1?argv[1]:"NVIDIA"; int ooo=argc>2&&!strcmp(argv[2],"ooo");
  int N=argc>3?atoi(argv[3]):800;
  cl_platform_id ps[8];cl_uint np=0;clGetPlatformIDs(8,ps,&np);cl_platform_id p=0;
  for(cl_uint i=0;i<np;i++){char n[256];clGetPlatformInfo(ps[i],CL_PLATFORM_NAME,256,n,0);if(strstr(n,want))p=ps[i];}
  if(!p){fprintf(stderr,"no platform %s\n",want);return 2;}
  cl_device_id d;clGetDeviceIDs(p,CL_DEVICE_TYPE_ALL,1,&d,0);char dn[256];clGetDeviceInfo(d,CL_DEVICE_NAME,256,dn,0);
  cl_ulong res=0;clGetDeviceInfo(d,CL_DEVICE_PROFILING_TIMER_RESOLUTION,sizeof res,&res,0);
  cl_context c=clCreateContext(0,1,&d,0,0,0);
  cl_queue_properties pr[]={CL_QUEUE_PROPERTIES,CL_QUEUE_PROFILING_ENABLE|(ooo?CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE:0),0};
  cl_command_queue q=clCreateCommandQueueWithProperties(c,d,pr,0);
  cl_program pg=clCreateProgramWithSource(c,1,&src,0,0);clBuildProgram(pg,1,&d,0,0,0);
  cl_kernel k=clCreateKernel(pg,"inc",0);cl_mem b=clCreateBuffer(c,CL_MEM_READ_WRITE,4*64,0,0);
  int z[64]={0};clEnqueueWriteBuffer(q,b,1,0,sizeof z,z,0,0,0);clSetKernelArg(k,0,sizeof b,&b);
  size_t g=64;
  // clGetDeviceAndHostTimer
  cl_ulong dt=0,ht=0;long long m0=ns(CLOCK_MONOTONIC),r0=ns(CLOCK_REALTIME);
  cl_int e=clGetDeviceAndHostTimer(d,&dt,&ht);long long m1=ns(CLOCK_MONOTONIC),r1=ns(CLOCK_REALTIME);
  fprintf(stderr,"%s: %s timer res %llu ns; clGetDeviceAndHostTimer rc %d dev %llu host %llu; host-mono %lld host-real %lld dev-real %lld\n",
    want,dn,(unsigned long long)res,e,(unsigned long long)dt,(unsigned long long)ht,(long long)ht-(m0+m1)/2,(long long)ht-(r0+r1)/2,(long long)dt-(r0+r1)/2);
  for(int w=0;w<20;w++){clEnqueueNDRangeKernel(q,k,1,0,&g,0,0,0,0);} clFinish(q);
  double sr=0,srr=0,sm=0,smm=0; long long t00=ns(CLOCK_MONOTONIC);
  int early_r=0,early_m=0,late_r=0,late_m=0; long long maxer=0,maxem=0;
  printf("i,t_ms,sleep_us,width_ns,q_minus_mono,q_minus_real,start_minus_mono0,start_minus_real0,end_minus_mono2,end_minus_real2,real_minus_mono,submit_minus_q,start_minus_q,dur\n");
  for(int i=0;i<N;i++){
    int sl=(i%4==0)?10000:(i%4==1)?1000:(i%4==2)?100:0; if(sl)usleep(sl);
    cl_event ev; long long a0=ns(CLOCK_MONOTONIC),b0=ns(CLOCK_REALTIME);
    clEnqueueNDRangeKernel(q,k,1,0,&g,0,0,0,&ev);
    long long a1=ns(CLOCK_MONOTONIC),b1=ns(CLOCK_REALTIME);
    clWaitForEvents(1,&ev);
    long long a2=ns(CLOCK_MONOTONIC),b2=ns(CLOCK_REALTIME);
    cl_ulong Q,S,St,E;clGetEventProfilingInfo(ev,CL_PROFILING_COMMAND_QUEUED,8,&Q,0);clGetEventProfilingInfo(ev,CL_PROFILING_COMMAND_SUBMIT,8,&S,0);
    clGetEventProfilingInfo(ev,CL_PROFILING_COMMAND_START,8,&St,0);clGetEventProfilingInfo(ev,CL_PROFILING_COMMAND_END,8,&E,0);clReleaseEvent(ev);
    long long qm=(long long)Q-(a0+a1)/2, qr=(long long)Q-(b0+b1)/2;
    printf("%d,%.3f,%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld\n",i,(a0-t00)/1e6,sl,a1-a0,qm,qr,(long long)St-a0,(long long)St-b0,(long long)E-a2,(long long)E-b2,b0-a0,(long long)S-(long long)Q,(long long)St-(long long)Q,(long long)(E-St));
    sr+=qr;srr+=(double)qr*qr;sm+=qm;smm+=(double)qm*qm;
  }
  fprintf(stderr,"%s %s: N %d over %.2f s: Q-mono mean %.0f sd %.0f; Q-real mean %.0f sd %.0f\n",want,ooo?"ooo":"in-order",N,(ns(CLOCK_MONOTONIC)-t00)/1e9,sm/N,sqrt(smm/N-(sm/N)*(sm/N)),sr/N,sqrt(srr/N-(sr/N)*(sr/N)));
  return 0;
}
