"""erase"""
