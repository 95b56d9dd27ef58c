def ConfigSources(path):
    return []
def Decode(tensors, configs):
    return None
